package idempg_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/contrib/idempg"
)

// How cutProxy cuts the connection that sends the first COMMIT.
const (
	// cutAfterCommit: COMMIT reaches the server, its answer never reaches
	// the client.
	cutAfterCommit = iota + 1
	// cutBeforeCommit: COMMIT never reaches the server.
	cutBeforeCommit
	// cutAll: as cutAfterCommit, and every other connection is closed and
	// no new one accepted.
	cutAll
)

// cutProxy forwards TCP connections to PostgreSQL and cuts the one that
// sends the first COMMIT, as a network that fails during COMMIT does.
type cutProxy struct {
	l      net.Listener
	target string
	mode   int
	cut    atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
}

func newCutProxy(t *testing.T, e *env, target string, mode int) *cutProxy {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(e.cluster.Addrs.IP(1), "0"))
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{l: l, target: target, mode: mode}
	t.Cleanup(p.close)
	go p.serve()
	return p
}

// dsn is the connection string of database db through the proxy.
func (p *cutProxy) dsn(db string) string {
	host, port, _ := net.SplitHostPort(p.l.Addr().String())
	return "host=" + host + " port=" + port + " user=postgres dbname=" + db + " sslmode=disable"
}

func (p *cutProxy) close() {
	p.l.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

func (p *cutProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() {
			io.Copy(c, s)
			c.Close()
			s.Close()
		}()
		go p.forward(c, s)
	}
}

// forward copies the client's messages to the server until it sees the
// first COMMIT (a simple query "commit", as pgx sends it).
func (p *cutProxy) forward(c, s net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if err != nil {
			s.Close()
			return
		}
		chunk := buf[:n]
		if bytes.Contains(bytes.ToLower(chunk), []byte("commit\x00")) && p.cut.CompareAndSwap(false, true) {
			if p.mode != cutBeforeCommit {
				s.Write(chunk)
			}
			c.Close()
			if p.mode == cutBeforeCommit {
				s.Close() // the server sees the client go and aborts
			}
			if p.mode == cutAll {
				p.close()
			}
			return
		}
		if _, err := s.Write(chunk); err != nil {
			c.Close()
			return
		}
	}
}

// TestCommitOutcome: the connection fails during COMMIT. Do finds out what
// happened by fencing again: committed, it returns the response (and
// completes the key); not committed, an error and the key released; unable
// to reach the database, ErrCommitUnknown and the key released. In every
// case the key ends with exactly one committed effect.
func TestCommitOutcome(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var dbName string
	if err := e.db.QueryRowContext(ctx, "SELECT current_database()").Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mode int
	}{{"committed", cutAfterCommit}, {"not committed", cutBeforeCommit}, {"unknown", cutAll}} {
		t.Run(tc.name, func(t *testing.T) {
			p := newCutProxy(t, e, pgServerAddr(t, e), tc.mode)
			db, err := sql.Open("pgx", p.dsn(dbName))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			r, err := idempg.New(db, e.cl, idempg.Options{})
			if err != nil {
				t.Fatal(err)
			}
			id := testID("commit-" + tc.name)
			res, err := r.Do(ctx, id, fingerprint, effect("cut"))
			if !p.cut.Load() {
				t.Fatal("the proxy saw no COMMIT")
			}
			var bodies []string
			switch tc.mode {
			case cutAfterCommit:
				if err != nil || !res.Executed {
					t.Fatalf("Do whose COMMIT committed but whose answer was lost: %+v, %v; want executed, no error", res, err)
				}
				bodies = append(bodies, string(res.Response.Body))
			case cutBeforeCommit:
				if err == nil || errors.Is(err, idempg.ErrCommitUnknown) || res.Executed {
					t.Fatalf("Do whose COMMIT never arrived: %+v, %v; want an error saying not committed", res, err)
				}
			case cutAll:
				if !errors.Is(err, idempg.ErrCommitUnknown) {
					t.Fatalf("Do that cannot reach the database after COMMIT: %+v, %v; want ErrCommitUnknown", res, err)
				}
			}
			again, err := e.r.Do(ctx, id, fingerprint, effect("again"), client.WithWait(10e9))
			if err != nil {
				t.Fatalf("the next call: %v", err)
			}
			if wantRun := tc.mode == cutBeforeCommit; again.Executed != wantRun {
				t.Fatalf("the next call: %+v; want executed %v", again, wantRun)
			}
			bodies = append(bodies, string(again.Response.Body))
			checkKeyEffect(t, e.db, id.Key, bodies)
		})
	}
}

// pgServerAddr is the TCP address of e's PostgreSQL server.
func pgServerAddr(t *testing.T, e *env) string {
	t.Helper()
	var host string
	var port int
	if err := e.db.QueryRow("SELECT host(inet_server_addr()), inet_server_port()").Scan(&host, &port); err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// checkKeyEffect fails t unless key has exactly one committed effect and
// every body got for it names that effect.
func checkKeyEffect(t *testing.T, db *sql.DB, key string, bodies []string) {
	t.Helper()
	var n int
	var id int64
	if err := db.QueryRow("SELECT count(*), min(id) FROM effects WHERE k = $1", key).Scan(&n, &id); err != nil || n != 1 {
		t.Fatalf("key %s: %d committed effects, %v; want exactly 1", key, n, err)
	}
	want := fmt.Sprintf("effect %d of %s ", id, key)
	for _, b := range bodies {
		if !strings.HasPrefix(b, want) {
			t.Errorf("key %s: a caller got %q, want the committed %q...", key, b, want)
		}
	}
}
