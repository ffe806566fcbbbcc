package pgtest

import (
	"errors"
	"net"
	"strconv"
	"testing"
)

// recorder is a testing.TB that records Skip and Fatal instead of ending.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper()              {}
func (r *recorder) Skip(...any)          { r.skipped = true }
func (r *recorder) Fatal(...any)         { r.failed = true }
func (r *recorder) Skipf(string, ...any) { r.skipped = true }

func TestRequire(t *testing.T) {
	other := errors.New("initdb failed")
	for _, tc := range []struct {
		name            string
		ci, require     string
		err             error
		skipped, failed bool
	}{
		{name: "server found", err: nil},
		{name: "no server, not CI", err: ErrNoBinaries, skipped: true},
		{name: "no server, CI", ci: "true", err: ErrNoBinaries, failed: true},
		{name: "no server, .ci/run", require: "1", err: ErrNoBinaries, failed: true},
		{name: "server broken, not CI", err: other, failed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			t.Setenv("IDEMNODE_REQUIRE_POSTGRES", tc.require)
			r := &recorder{}
			Require(r, tc.err)
			if r.skipped != tc.skipped || r.failed != tc.failed {
				t.Errorf("skipped %v, failed %v; want %v, %v", r.skipped, r.failed, tc.skipped, tc.failed)
			}
		})
	}
}

// TestServerListensOnLoopbackTCP: clients reach the server over TCP on
// 127.0.0.1, and the server says so.
func TestServerListensOnLoopbackTCP(t *testing.T) {
	s, err := Start()
	Require(t, err)
	defer s.Stop()
	_, db := s.NewDB(t)
	var addr string
	var port int
	if err := db.QueryRow("SELECT host(inet_client_addr()), inet_server_port()").Scan(&addr, &port); err != nil {
		t.Fatal(err)
	}
	if want := s.Addr(); net.JoinHostPort(addr, strconv.Itoa(port)) != want {
		t.Fatalf("connected over %s:%d, want TCP to %s", addr, port, want)
	}
}
