package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/idemnode/idemnode/fsm"
)

// memberMeta is what a node advertises in its memberlist metadata: how to
// reach its Raft and gRPC endpoints, and whether it is already part of a
// Raft cluster (so a new node never bootstraps beside an existing cluster).
type memberMeta struct {
	Version   int    `json:"v"`
	Raft      string `json:"raft"`
	GRPC      string `json:"grpc"`
	Expect    int    `json:"expect,omitempty"`
	InCluster bool   `json:"in_cluster,omitempty"`
	// Leaving is gossiped just before a graceful leave. memberlist's leave
	// event does not say whether a node left or died (it reports the
	// node's last state, alive), so the flag is how the leader tells them apart.
	Leaving bool `json:"leaving,omitempty"`
	// Applies is the newest command level the node's release applies
	// (fsm.LastLevel); releases before it was gossiped apply
	// fsm.BaseLevel and do not send it.
	Applies int `json:"applies,omitempty"`
	// Cluster is the identity of the cluster whose state the node holds,
	// in hex (identity.go); State says it holds Raft state at all. A node
	// that sends neither holds no state, or runs an older release (Applies
	// tells which).
	Cluster string `json:"cluster,omitempty"`
	State   bool   `json:"state,omitempty"`
}

// Member is one server as membership sees it.
type Member struct {
	ID        string
	Gossip    string
	Raft      string
	GRPC      string
	State     string // alive, dead or left
	InCluster bool
	// Applies is the newest command level the member's release applies.
	Applies int
	// Cluster is the identity of the cluster whose state it holds, in hex
	// ("" for none); HasState says it holds Raft state.
	Cluster  string
	HasState bool
	// Since is when the member entered its current state, as this node
	// observed it (zero for members seen alive since start).
	Since time.Time

	leaving bool
}

// membership runs memberlist: discovery of the other servers and failure
// detection. It keeps its own table of members, fed by memberlist's events
// (which carry copies of the node records): memberlist's Members() hands out
// pointers to records its own goroutines keep writing, and it forgets dead
// and left nodes after a while.
type membership struct {
	list *memberlist.Memberlist
	// keyring encrypts gossip; nil when it is plaintext.
	keyring *memberlist.Keyring
	log     *slog.Logger
	events  chan memberlist.NodeEvent
	// changed receives a signal (coalesced) after every membership change.
	changed chan struct{}
	stop    chan struct{}
	done    chan struct{}

	// mu guards meta (advertised by NodeMeta), inClusterUnsent and table.
	mu   sync.Mutex
	meta memberMeta
	// inClusterUnsent: meta.InCluster changed and no broadcast of it has
	// gone out yet.
	inClusterUnsent bool
	table           map[string]Member

	// updateMu serializes our UpdateNode calls: memberlist reads our own
	// node's state outside its lock there while another call rewrites it.
	updateMu sync.Mutex
}

// gossipDelegate serves our metadata; the other delegate hooks are unused.
type gossipDelegate struct{ m *membership }

func (d gossipDelegate) NodeMeta(limit int) []byte {
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	b, _ := json.Marshal(d.m.meta)
	if len(b) > limit {
		return nil
	}
	return b
}
func (gossipDelegate) NotifyMsg([]byte)                {}
func (gossipDelegate) GetBroadcasts(int, int) [][]byte { return nil }
func (gossipDelegate) LocalState(bool) []byte          { return nil }
func (gossipDelegate) MergeRemoteState([]byte, bool)   {}

func newMembership(cfg Config, meta memberMeta, logger *slog.Logger) (*membership, error) {
	host, portStr, err := net.SplitHostPort(cfg.GossipAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip address %q: %w", cfg.GossipAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("gossip port %q: %w", portStr, err)
	}
	var advHost string
	var advPort int
	if cfg.GossipAdvertise != "" {
		// Checked before anything starts: a port peers cannot dial would
		// leave the node unreachable with no word why.
		if advHost, advPort, err = advertisedGossip(cfg.GossipAdvertise); err != nil {
			return nil, err
		}
	}
	keyring, err := newKeyring(cfg.GossipKeys)
	if err != nil {
		return nil, err
	}
	m := &membership{keyring: keyring, log: logger, meta: meta, table: map[string]Member{}, events: make(chan memberlist.NodeEvent, 256),
		changed: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go m.consume()
	mc := memberlist.DefaultLANConfig()
	if cfg.GossipProfile == "local" {
		mc = memberlist.DefaultLocalConfig()
	}
	mc.Name = cfg.NodeID
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertisePort = port
	if cfg.GossipAdvertise != "" {
		mc.AdvertiseAddr, mc.AdvertisePort = advHost, advPort
	}
	// With a keyring, memberlist refuses plaintext both ways: a node
	// without the key is not heard, and never hears us.
	mc.Keyring, mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = m.keyring, true, true
	mc.Delegate = gossipDelegate{m}
	mc.Events = &memberlist.ChannelEventDelegate{Ch: m.events}
	mc.Logger = log.New(levelWriter{logger.With("component", "memberlist")}, "", 0)
	trans, err := newBoundGossipTransport(host, port, mc.Logger)
	if err != nil {
		return nil, err
	}
	mc.Transport = trans
	if port == 0 {
		mc.BindPort = trans.GetAutoBindPort()
		mc.AdvertisePort = mc.BindPort
	}
	m.list, err = memberlist.Create(mc)
	if err != nil {
		trans.Shutdown()
		close(m.stop)
		return nil, fmt.Errorf("start memberlist: %w", err)
	}
	return m, nil
}

// boundGossipTransport is memberlist's transport with TCP dials bound to
// the node's own IP (UDP already leaves from the bound socket); see the
// loopback trap in cluster/DESIGN.md.
type boundGossipTransport struct {
	*memberlist.NetTransport
	dialer net.Dialer
}

func newBoundGossipTransport(host string, port int, logger *log.Logger) (*boundGossipTransport, error) {
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{host}, BindPort: port, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("gossip transport on %s:%d: %w", host, port, err)
	}
	return &boundGossipTransport{NetTransport: nt, dialer: BoundDialer(&net.TCPAddr{IP: net.ParseIP(host)})}, nil
}

func (t *boundGossipTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	d := t.dialer
	d.Timeout = timeout
	return d.Dial("tcp", addr)
}

func (t *boundGossipTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, timeout)
}

// levelWriter turns memberlist's "[LEVEL] text" lines into slog records.
type levelWriter struct{ log *slog.Logger }

func (w levelWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := slog.LevelDebug
	switch {
	case strings.Contains(line, "[ERR]"):
		level = slog.LevelError
	case strings.Contains(line, "[WARN]"):
		level = slog.LevelWarn
	case strings.Contains(line, "[INFO]"):
		level = slog.LevelInfo
	}
	w.log.Log(context.Background(), level, line)
	return len(p), nil
}

// advertisedGossip splits the gossip advertise address into its host and a
// port peers can dial (1-65535).
func advertisedGossip(addr string) (string, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("gossip advertise address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("gossip advertise address %q: port %q is not a number from 1 to 65535", addr, ps)
	}
	return host, port, nil
}

// setInCluster updates the advertised flag and gossips it. The flag is
// what keeps peers from bootstrapping a second cluster, so a broadcast that
// failed stays pending and the next call sends it again.
func (m *membership) setInCluster(v bool) error {
	m.mu.Lock()
	if m.meta.InCluster != v {
		m.meta.InCluster = v
		m.inClusterUnsent = true
	}
	unsent := m.inClusterUnsent
	m.mu.Unlock()
	if !unsent {
		return nil
	}
	if err := m.updateNode(5 * time.Second); err != nil {
		return fmt.Errorf("gossip in_cluster=%v: %w", v, err)
	}
	m.mu.Lock()
	m.inClusterUnsent = false
	m.mu.Unlock()
	return nil
}

// setIdentity updates the advertised identity and state and gossips them.
func (m *membership) setIdentity(cluster string, hasState bool) {
	m.mu.Lock()
	changed := m.meta.Cluster != cluster || m.meta.State != hasState
	m.meta.Cluster, m.meta.State = cluster, hasState
	m.mu.Unlock()
	if changed {
		if err := m.updateNode(5 * time.Second); err != nil && !errors.Is(err, ErrShutdown) {
			m.log.Warn("gossip the cluster identity", "err", err)
		}
	}
}

// consume applies memberlist's events to the table until shutdown.
func (m *membership) consume() {
	defer close(m.done)
	for {
		select {
		case <-m.stop:
			return
		case ev := <-m.events:
			m.observe(ev)
			select {
			case m.changed <- struct{}{}:
			default:
			}
		}
	}
}

// observe records one membership event in the table.
func (m *membership) observe(ev memberlist.NodeEvent) {
	mem := memberOf(ev.Node)
	if mem.Raft == "" {
		return // not an idemnode server
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch ev.Event {
	case memberlist.NodeJoin, memberlist.NodeUpdate:
		mem.State = "alive"
	case memberlist.NodeLeave:
		mem.State = "dead"
		if mem.leaving {
			mem.State = "left"
		}
		mem.Since = time.Now()
	}
	m.table[mem.ID] = mem
}

func memberOf(n *memberlist.Node) Member {
	mem := Member{ID: n.Name, Gossip: n.Address()}
	var meta memberMeta
	if json.Unmarshal(n.Meta, &meta) == nil {
		mem.Raft, mem.GRPC, mem.InCluster, mem.leaving = meta.Raft, meta.GRPC, meta.InCluster, meta.Leaving
		mem.Applies = max(fsm.BaseLevel, meta.Applies)
		mem.Cluster, mem.HasState = meta.Cluster, meta.State
	}
	return mem
}

// members returns the table, sorted by id.
func (m *membership) members() []Member {
	m.mu.Lock()
	out := make([]Member, 0, len(m.table))
	for _, mem := range m.table {
		out = append(out, mem)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (m *membership) alive() []Member {
	var out []Member
	for _, mem := range m.members() {
		if mem.State == "alive" {
			out = append(out, mem)
		}
	}
	return out
}

func (m *membership) member(id string) (Member, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mem, ok := m.table[id]
	return mem, ok
}

// updateNode gossips our metadata again, one call at a time, waiting up to
// timeout for the broadcast to go out, or until shutdown. memberlist's
// wait ends only at its timeout, and once shutdown has stopped the gossip
// no broadcast goes out: Node.Close would wait for the whole timeout of
// every loop caught in an update. The call goes on in the background
// after shutdown until its timeout, holding updateMu, so no second call
// overlaps it.
func (m *membership) updateNode(timeout time.Duration) error {
	updated := make(chan error, 1)
	go func() {
		m.updateMu.Lock()
		defer m.updateMu.Unlock()
		select {
		case <-m.stop:
			updated <- ErrShutdown
			return
		default:
		}
		updated <- m.list.UpdateNode(timeout)
	}()
	select {
	case err := <-updated:
		return err
	case <-m.stop:
		return ErrShutdown
	}
}

// leave announces a graceful departure and stops gossiping: first the
// Leaving flag in our metadata, then memberlist's own leave message.
func (m *membership) leave(timeout time.Duration) error {
	m.mu.Lock()
	m.meta.Leaving = true
	m.mu.Unlock()
	if err := m.updateNode(timeout / 2); err != nil {
		return fmt.Errorf("announce leave: %w", err)
	}
	if err := m.list.Leave(timeout / 2); err != nil {
		return fmt.Errorf("leave memberlist: %w", err)
	}
	return nil
}

func (m *membership) shutdown() error {
	err := m.list.Shutdown()
	close(m.stop)
	<-m.done
	return err
}
