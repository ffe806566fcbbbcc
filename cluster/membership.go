package cluster

import (
	"context"
	"encoding/json"
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
}

// Member is one server as membership sees it.
type Member struct {
	ID        string
	Gossip    string
	Raft      string
	GRPC      string
	State     string // alive, suspect, dead, left
	InCluster bool
	// Since is when the member entered its current state, as this node
	// observed it (zero for members seen alive since start).
	Since time.Time

	leaving bool
}

// membership runs memberlist: discovery of the other servers and failure
// detection. It keeps its own record of departures, because memberlist
// forgets dead and left nodes after a while and Members lists only live ones.
type membership struct {
	list   *memberlist.Memberlist
	events chan memberlist.NodeEvent

	// mu guards meta (advertised by NodeMeta) and departed.
	mu       sync.Mutex
	meta     memberMeta
	departed map[string]Member
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
	m := &membership{meta: meta, departed: map[string]Member{}, events: make(chan memberlist.NodeEvent, 256)}
	mc := memberlist.DefaultLANConfig()
	if cfg.GossipProfile == "local" {
		mc = memberlist.DefaultLocalConfig()
	}
	mc.Name = cfg.NodeID
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertisePort = port
	if cfg.GossipAdvertise != "" {
		ah, ap, err := net.SplitHostPort(cfg.GossipAdvertise)
		if err != nil {
			return nil, fmt.Errorf("gossip advertise address %q: %w", cfg.GossipAdvertise, err)
		}
		mc.AdvertiseAddr = ah
		mc.AdvertisePort, _ = strconv.Atoi(ap)
	}
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
		return nil, fmt.Errorf("start memberlist: %w", err)
	}
	return m, nil
}

// boundGossipTransport is memberlist's transport with TCP dials bound to
// the node's own IP (UDP already leaves from the bound socket); see the
// loopback trap in DESIGN.md §7.
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

// setInCluster updates the advertised flag and gossips it.
func (m *membership) setInCluster(v bool) {
	m.mu.Lock()
	changed := m.meta.InCluster != v
	m.meta.InCluster = v
	m.mu.Unlock()
	if changed {
		_ = m.list.UpdateNode(5 * time.Second)
	}
}

// observe records a membership event; it returns the member it concerns.
func (m *membership) observe(ev memberlist.NodeEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch ev.Event {
	case memberlist.NodeJoin:
		delete(m.departed, ev.Node.Name)
	case memberlist.NodeLeave:
		mem := memberOf(ev.Node)
		mem.State = "dead"
		if mem.leaving {
			mem.State = "left"
		}
		mem.Since = time.Now()
		m.departed[mem.ID] = mem
	}
}

func memberOf(n *memberlist.Node) Member {
	mem := Member{ID: n.Name, Gossip: n.Address(), State: stateName(n.State)}
	var meta memberMeta
	if json.Unmarshal(n.Meta, &meta) == nil {
		mem.Raft, mem.GRPC, mem.InCluster, mem.leaving = meta.Raft, meta.GRPC, meta.InCluster, meta.Leaving
	}
	return mem
}

func stateName(s memberlist.NodeStateType) string {
	switch s {
	case memberlist.StateAlive:
		return "alive"
	case memberlist.StateSuspect:
		return "suspect"
	case memberlist.StateDead:
		return "dead"
	case memberlist.StateLeft:
		return "left"
	}
	return "unknown"
}

// members returns the live members and those that departed, sorted by id.
func (m *membership) members() []Member {
	var out []Member
	seen := map[string]bool{}
	for _, n := range m.list.Members() {
		mem := memberOf(n)
		if mem.Raft == "" {
			continue // not an idemnode server
		}
		seen[mem.ID] = true
		out = append(out, mem)
	}
	m.mu.Lock()
	for id, mem := range m.departed {
		if !seen[id] {
			out = append(out, mem)
		}
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (m *membership) alive() []Member {
	var out []Member
	for _, mem := range m.members() {
		if mem.State == "alive" || mem.State == "suspect" {
			out = append(out, mem)
		}
	}
	return out
}

func (m *membership) member(id string) (Member, bool) {
	for _, mem := range m.members() {
		if mem.ID == id {
			return mem, true
		}
	}
	return Member{}, false
}

// leave announces a graceful departure and stops gossiping: first the
// Leaving flag in our metadata, then memberlist's own leave message.
func (m *membership) leave(timeout time.Duration) error {
	m.mu.Lock()
	m.meta.Leaving = true
	m.mu.Unlock()
	if err := m.list.UpdateNode(timeout / 2); err != nil {
		return fmt.Errorf("announce leave: %w", err)
	}
	if err := m.list.Leave(timeout / 2); err != nil {
		return fmt.Errorf("leave memberlist: %w", err)
	}
	return nil
}

func (m *membership) shutdown() error { return m.list.Shutdown() }
