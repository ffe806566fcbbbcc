// Package pgtest runs a throwaway PostgreSQL server for tests: initdb on a
// temporary directory and pg_ctl start, listening on a free TCP port of
// 127.0.0.1 (clients connect over TCP, as applications do) and on a Unix
// socket in that directory (for pg_ctl), stopped and removed at the end. Debian keeps the server's programs under
// /usr/lib/postgresql/<version>/bin, off PATH. initdb refuses to run as
// root, and CI runs as root: the server then runs as the unprivileged user
// nobody (runuser), on a directory it owns.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// ErrNoBinaries means no PostgreSQL server programs were found.
var ErrNoBinaries = errors.New("pgtest: no PostgreSQL server found (initdb and pg_ctl under /usr/lib/postgresql/*/bin or on PATH); install Debian's postgresql")

// runAs is the unprivileged user a root process runs the server as.
const runAs = "nobody"

// Server is a running throwaway server.
type Server struct {
	dir, bin string
	port     int
	asUser   string // "" when the server runs as this process's user
	dbs      atomic.Int64
}

// Start initialises and starts a server with the given extra settings
// (name=value, passed as -c), such as shared_preload_libraries.
func Start(settings ...string) (*Server, error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "idempg-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	s := &Server{dir: dir, bin: bin}
	if err := s.start(settings); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(settings []string) error {
	if os.Geteuid() == 0 {
		u, err := user.Lookup(runAs)
		if err != nil {
			return fmt.Errorf("pgtest: running as root needs the user %s: %w", runAs, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		// MkdirTemp made the directory 0700 for root; the server's user
		// owns it instead, and root (the tests) reaches the socket anyway.
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
		s.asUser = runAs
	}
	data := filepath.Join(s.dir, "data")
	if out, err := s.run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	s.port = port
	// Durability is not what these tests are about, so fsync is off.
	o := []string{"-k", s.dir, "-c", "listen_addresses=127.0.0.1", "-c", "port=" + strconv.Itoa(port),
		"-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300"}
	for _, kv := range settings {
		o = append(o, "-c", kv)
	}
	out, err := s.run("pg_ctl", "start", "-w", "-t", "60", "-D", data, "-l", filepath.Join(s.dir, "server.log"),
		"-o", strings.Join(o, " ")).CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
		return fmt.Errorf("pgtest: pg_ctl start: %w\n%s\n%s", err, out, log)
	}
	return nil
}

// run prepares one of the server's programs, as the server's user.
func (s *Server) run(prog string, args ...string) *exec.Cmd {
	path := filepath.Join(s.bin, prog)
	if s.asUser == "" {
		return exec.Command(path, args...)
	}
	cmd := exec.Command("runuser", append([]string{"-u", s.asUser, "--", path}, args...)...)
	cmd.Dir = s.dir // nobody's home does not exist
	return cmd
}

// Stop stops the server at once and removes its directory.
func (s *Server) Stop() {
	data := filepath.Join(s.dir, "data")
	if _, err := os.Stat(filepath.Join(data, "postmaster.pid")); err == nil {
		if out, err := s.run("pg_ctl", "stop", "-w", "-m", "immediate", "-D", data).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: pg_ctl stop: %v\n%s", err, out)
		}
	}
	os.RemoveAll(s.dir)
}

// Addr is the server's TCP address, 127.0.0.1:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// DSN is the connection string of database db, over TCP.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=%s sslmode=disable", s.port, db)
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago. The
// server binds it right after; another process taking it in between makes
// pg_ctl start fail with a clear error rather than share a server.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// NewDB creates a fresh database for t and returns its connection string and
// a pool on it, closed when t ends.
func (s *Server) NewDB(t testing.TB) (string, *sql.DB) {
	t.Helper()
	name := fmt.Sprintf("t%d", s.dbs.Add(1))
	admin, err := sql.Open("pgx", s.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	dsn := s.DSN(name)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return dsn, db
}

// findBin returns the directory of initdb and pg_ctl: the newest version
// under /usr/lib/postgresql, else PATH.
func findBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if isFile(filepath.Join(d, "initdb")) && isFile(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if d := filepath.Dir(p); isFile(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", ErrNoBinaries
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

var shared struct {
	once sync.Once
	s    *Server
	err  error
}

// Shared returns the server this test process shares between its tests,
// starting it on first use (StopShared stops it, from TestMain). A missing
// server skips or fails t as Require says.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() { shared.s, shared.err = Start() })
	Require(t, shared.err)
	return shared.s
}

// Require ends t when err, from Start, is not nil: without PostgreSQL it
// skips t, saying so, except in CI (CI or IDEMNODE_REQUIRE_POSTGRES set,
// as .ci/run sets it after installing the server), where the tests must
// run: then, and for any other error, it fails t.
func Require(t testing.TB, err error) {
	t.Helper()
	switch {
	case errors.Is(err, ErrNoBinaries) && os.Getenv("CI") == "" && os.Getenv("IDEMNODE_REQUIRE_POSTGRES") == "":
		t.Skip(err)
	case err != nil:
		t.Fatal(err)
	}
}

// StopShared stops the shared server if it was started.
func StopShared() {
	if shared.s != nil {
		shared.s.Stop()
	}
}
