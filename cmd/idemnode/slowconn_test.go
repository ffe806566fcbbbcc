package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemnode/idemnode/internal/testaddr"
	"github.com/idemnode/idemnode/internal/testutil"
)

// slowConnLimits are the attacked cluster's limits: small caps, so that a
// few hundred connections are over them, and short timeouts, so that the
// attacker's connections inside the caps are closed within the test.
var slowConnLimits = []string{"--grpc-max-conns", "50", "--api-max-conns", "50", "--max-conns-per-ip", "20",
	"--read-timeout", "2s", "--grpc-handshake-timeout", "2s"}

// TestSlowConnectionsLeaveTheLeaderServing is the slow-connection attack of
// the security probe against a cluster's leader, on a budget: the nodes run
// with 384 file descriptors (ulimit -n), and one attacker address holds 200
// connections trickling a JSON body a byte a second on the JSON API port and
// 200 that never send the HTTP/2 preface on the gRPC port, reconnecting
// whenever one is closed. Without limits that takes every descriptor the
// node has: accept fails with EMFILE and new clients wait in the kernel's
// backlog. With them, claims through the leader's gRPC port (the CLI, a
// new connection each) keep succeeding, /healthz answers, the leader keeps
// its term, and every attacker connection is closed: over the caps at once,
// inside them when its body or handshake times out.
func TestSlowConnectionsLeaveTheLeaderServing(t *testing.T) {
	t.Parallel()
	// The nodes need addresses of their own (hosts 1-3 of the block), apart
	// from the attackers' (50 and 60-63) and from 127.0.0.1, where the CLI's
	// calls come from.
	addrs := testaddr.New(t)
	nodes := mustClusterOn(t, addrs, 384, slowConnLimits...)
	var st map[string]any
	nodes[0].cliJSON(exitOK, &st, "status")
	leaderID, _ := st["leader_id"].(string)
	var leader, other *server
	for _, n := range nodes {
		if n.nodeID == leaderID {
			leader = n
		} else {
			other = n
		}
	}
	term := st["term"]

	atk := &attacker{src: &net.TCPAddr{IP: addrs.NetIP(50)}, done: make(chan struct{})}
	atk.redial.Store(true)
	atk.run(200, leader.api, slowBody)
	atk.run(200, leader.grpc, silent)
	defer atk.stop()
	testutil.Eventually(t, 20*time.Second, "the attacker's connections", func() bool { return atk.opened.Load() >= 400 })

	defer func() {
		if t.Failed() {
			lg := leader.log()
			t.Logf("the leader's log ends:\n%s", lg[max(0, len(lg)-1500):])
		}
	}()
	hc := &http.Client{Timeout: 5 * time.Second}
	// Claims go on until the timeouts have closed some of the connections
	// held inside the caps, and the attacker has opened new ones since.
	claims := 0
	testutil.Eventually(t, 30*time.Second, "an attacker connection closed by a timeout, with claims going on", func() error {
		longest := time.Duration(atk.longest.Load())
		if claims >= 10 && longest >= 2*time.Second {
			return nil
		}
		var c claimJSON
		leader.cliJSON(exitOK, &c, "claim", "--no-fingerprint", "--scope", "s", "--key", fmt.Sprintf("slow-%d", claims), "--timeout", "10s")
		resp, err := hc.Get("http://" + leader.http + "/healthz")
		if err != nil {
			t.Fatalf("/healthz of the attacked leader, after %d claims: %v", claims+1, err)
		}
		resp.Body.Close()
		claims++
		return fmt.Errorf("after %d claims the longest attacker connection lasted %s", claims, longest)
	})
	other.cliJSON(exitOK, &st, "status")
	if st["leader_id"] != leaderID || st["term"] != term {
		t.Fatalf("under the attack the leader changed: %v in term %v, before %s in term %v", st["leader_id"], st["term"], leaderID, term)
	}
	metrics := scrape(t, leader)
	for _, series := range []string{`idemnode_listener_refused_total{listener="api",reason="address_cap"}`,
		`idemnode_listener_refused_total{listener="grpc",reason="address_cap"}`} {
		if metrics[series] == 0 {
			t.Errorf("/metrics counts no refused connections in %s", series)
		}
	}
	for _, l := range []string{"api", "grpc"} {
		series := `idemnode_listener_connections{listener="` + l + `"}`
		if held, ok := metrics[series]; !ok || held > 50 {
			t.Errorf("/metrics: %s = %v under the attack, want at most the listener's cap of 50", series, held)
		}
	}
	// Every connection the attacker holds is closed by the server within
	// the timeouts: the longest-lived lasted the 2 s body or handshake
	// timeout and a margin for a loaded machine.
	atk.redial.Store(false)
	testutil.Eventually(t, 20*time.Second, "the server to close every attacker connection", func() bool {
		return atk.closed.Load() == atk.opened.Load()
	})
	if longest := time.Duration(atk.longest.Load()); longest > 10*time.Second {
		t.Fatalf("an attacker connection stayed open %s; the timeouts are 2s", longest)
	}
	t.Logf("attacker: %d connections opened and closed, the longest held %s", atk.opened.Load(),
		time.Duration(atk.longest.Load()))
	atk.stop()
	peersPassAFullListener(t, addrs, leader, other)
}

// peersPassAFullListener fills the leader's gRPC listener from four
// addresses with connections that finish the HTTP/2 handshake and then
// idle, which no timeout closes: a new client of the leader is refused,
// but a claim through the follower is forwarded to the leader over a new
// connection from the follower's address, which the cap lets in.
func peersPassAFullListener(t *testing.T, addrs *testaddr.Block, leader, follower *server) {
	t.Helper()
	var atks []*attacker
	for i := range 4 {
		a := &attacker{src: &net.TCPAddr{IP: addrs.NetIP(60 + i)}, done: make(chan struct{})}
		a.redial.Store(true)
		a.run(25, leader.grpc, idleHTTP2)
		defer a.stop()
		atks = append(atks, a)
	}
	const held = `idemnode_listener_connections{listener="grpc"}`
	testutil.Eventually(t, 20*time.Second, "the attackers to fill the leader's gRPC listener", func() bool {
		return scrape(t, leader)[held] == 50
	})
	if _, stderr, code := cli(t, "claim", "--no-fingerprint", "--scope", "s", "--key", "refused", "--addr", leader.grpc, "--timeout", "2s"); code != exitRetry {
		t.Fatalf("a new client of a full listener: exit %d, want %d (refused)\n%s", code, exitRetry, stderr)
	}
	var c claimJSON
	follower.cliJSON(exitOK, &c, "claim", "--no-fingerprint", "--scope", "s", "--key", "forwarded", "--timeout", "10s")
	if n := scrape(t, leader)[held]; n <= 50 {
		t.Fatalf("the leader's gRPC listener holds %v connections after a forwarded claim, want the follower's over the cap of 50", n)
	}
}

// attacker holds connections open from one source address and, while
// redial is set, opens a new one whenever the server closes one.
type attacker struct {
	src    *net.TCPAddr
	redial atomic.Bool
	// done, closed by stop, drops the connections still held.
	done   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	opened atomic.Int64
	closed atomic.Int64
	// longest is the longest time, in nanoseconds, that the server kept one
	// of the connections open.
	longest atomic.Int64
}

// How an attacker's connection behaves once open.
type attackMode int

const (
	// slowBody sends an HTTP request's headers, then its body a byte a second.
	slowBody attackMode = iota
	// silent never sends a byte.
	silent
	// idleHTTP2 sends the HTTP/2 client preface and settings, which ends
	// the handshake, and then nothing.
	idleHTTP2
)

// run starts n connections to addr in mode m.
func (a *attacker) run(n int, addr string, m attackMode) {
	for range n {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			for a.redial.Load() {
				a.hold(addr, m)
				// Paced, so a refused attacker does not spin.
				select {
				case <-a.done:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}
}

// hold opens one connection and keeps it until the server closes it or the
// attack stops.
func (a *attacker) hold(addr string, m attackMode) {
	d := net.Dialer{LocalAddr: a.src, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer c.Close()
	a.opened.Add(1)
	start := time.Now()
	closed := make(chan struct{})
	go func() {
		// The server may write first (gRPC's settings, an HTTP error);
		// only its closing the connection ends the reads (EOF or reset).
		_, _ = io.Copy(io.Discard, c)
		close(closed)
	}()
	switch m {
	case slowBody:
		fmt.Fprintf(c, "POST /v1/claim HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	case idleHTTP2:
		// The preface, then an empty SETTINGS frame (length 0, type 4).
		fmt.Fprintf(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-closed:
			a.closed.Add(1)
			for held := int64(time.Since(start)); ; {
				old := a.longest.Load()
				if held <= old || a.longest.CompareAndSwap(old, held) {
					break
				}
			}
			return
		case <-a.done:
			return
		case <-tick.C:
			if m == slowBody {
				_, _ = c.Write([]byte(" "))
			}
		}
	}
}

// stop drops the connections still held and waits for the goroutines.
// It may be called again.
func (a *attacker) stop() {
	a.redial.Store(false)
	a.once.Do(func() { close(a.done) })
	a.wg.Wait()
}

// mustClusterOn starts three plaintext servers on hosts 1-3 of addrs that
// form one cluster, each limited to nofile descriptors, with extra added to
// their serve flags, and waits until every one is ready.
func mustClusterOn(t *testing.T, addrs *testaddr.Block, nofile int, extra ...string) []*server {
	t.Helper()
	nodes := make([]*server, 3)
	for i := range nodes {
		ip := addrs.IP(i + 1)
		n := newServer(t, nil, nil)
		n.nodeID = "n" + string(rune('1'+i))
		n.grpc, n.raft, n.http, n.gossip, n.api = freeAddrOn(t, ip), freeAddrOn(t, ip), freeAddrOn(t, ip),
			freeAddrOn(t, ip), freeAddrOn(t, ip)
		n.nofile = nofile
		nodes[i] = n
	}
	return launchCluster(nodes, extra)
}

// TestAPIWaitOutlastsTheReadTimeout: --read-timeout bounds how long a
// client takes to send its request, not how long the answer takes: a
// /v1/wait of 3 s behind a read timeout of 1 s waits its 3 s and answers
// IN_PROGRESS, over HTTP/1.1 and HTTP/2. A body that does not arrive
// within the read timeout gets its connection closed.
func TestAPIWaitOutlastsTheReadTimeout(t *testing.T) {
	t.Parallel()
	p := newServePKI(t)
	s := newServer(t, append(p.serveFlags(), "--auth", "--auth-cert-tenant", "cn", "--read-timeout", "1s"), p.clientFlags)
	s.api = testutil.FreeAddr(t)
	s.start()
	tlsConf := &tls.Config{RootCAs: p.cluster.Pool(), Certificates: []tls.Certificate{p.clients.IssueClient(t, "acme").TLS(t)}}
	for _, h2 := range []bool{false, true} {
		tr := &http.Transport{TLSClientConfig: tlsConf, ForceAttemptHTTP2: h2}
		if !h2 {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // HTTP/1.1 only
		}
		hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		id := `{"scope":"s","key":"wait-` + keySuffix(h2) + `"}`
		if code, body := postJSON(t, hc, "https://"+s.api+"/v1/claim", `{"id":`+id+`,"owner":"o"}`); code != http.StatusOK {
			t.Fatalf("%s: claim: HTTP %d %s", protoName(h2), code, body)
		}
		start := time.Now()
		code, body := postJSON(t, hc, "https://"+s.api+"/v1/wait", `{"id":`+id+`,"timeout":"3s"}`)
		if code != http.StatusOK || !strings.Contains(body, "OUTCOME_IN_PROGRESS") || time.Since(start) < 3*time.Second {
			t.Fatalf("%s: a 3s wait behind a 1s read timeout: HTTP %d %s after %s, want IN_PROGRESS after 3s",
				protoName(h2), code, body, time.Since(start))
		}
	}

	raw := tlsConf.Clone()
	raw.NextProtos = []string{"http/1.1"} // the transports above added h2
	c, err := tls.Dial("tcp", s.api, raw)
	if err != nil {
		t.Fatalf("dial the JSON API: %v", err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/claim HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	got := testutil.Go(func() ([]byte, error) { return io.ReadAll(c) })
	if a := testutil.Await(t, "the server to close a slow body's connection", 10*time.Second, got); !strings.Contains(string(a.V), "400 Bad Request") {
		t.Fatalf("a body slower than the read timeout: read %q (%v), want a 400 and the connection closed", a.V, a.Err)
	}
}

// postJSON posts body to url and returns the status and the answer.
func postJSON(t *testing.T, hc *http.Client, url, body string) (int, string) {
	t.Helper()
	resp, err := hc.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestCapsThatDoNotFitTheDescriptorLimit: connection caps given that, with
// the descriptor reserve, exceed the process's open-file limit are refused
// at start with exit code 2 and a message that says what to change; caps
// left at their defaults are lowered to fit instead.
func TestCapsThatDoNotFitTheDescriptorLimit(t *testing.T) {
	t.Parallel()
	needBinary(t)
	run := func(flags ...string) (string, int) {
		args := append([]string{"-c", `ulimit -n 512 && exec "$@"`, "sh", binary, "serve", "--insecure", "--data-dir", t.TempDir(),
			"--grpc-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--http-addr", "", "--api-addr", "", "--gossip-addr", ""}, flags...)
		cmd := exec.Command("sh", args...)
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	out, code := run("--grpc-max-conns", "1000")
	if code != exitUsage || !strings.Contains(out, "the connection caps (--grpc-max-conns 1000) and the reserve of 256 descriptors "+
		"exceed the process's limit of 512 open files") {
		t.Fatalf("caps over the limit: exit %d, output:\n%s", code, out)
	}
	out, code = run("--fd-reserve", "600")
	if code != exitUsage || !strings.Contains(out, "the reserve of 600 descriptors exceeds the process's limit of 512 open files") {
		t.Fatalf("a reserve over the limit: exit %d, output:\n%s", code, out)
	}
}
