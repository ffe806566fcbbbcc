// Package testaddr hands out loopback addresses and iptables chain names to
// tests, so that tests running at once never pick the same ones: those of
// one test binary, of every package's binary that `go test ./...` runs in
// parallel, and of a second `go test` started beside the first.
//
// A test takes a Block: the 254 addresses 127.A.B.1-254 and one iptables
// chain tag, its own until the test ends. Blocks come from 127.64.0.0/10
// (127.64.0.x to 127.127.255.x), which no hand-configured address of the
// repository uses: scripts/cluster.sh and the benchmark scripts stay in
// 127.0.0.x, and the data dirs of the upgrade fixtures (cluster/testdata)
// recorded Raft addresses in 127.0.120.x (see Reserved).
//
// A block is held by an exclusive flock on a file of its own under
// os.TempDir()/idemnode-testaddr. The kernel drops the lock when the file is
// closed or the process dies however it dies, so a killed run leaves no
// block taken; what it may leave is an iptables chain under the block's tag,
// which package netfault removes before it creates its chain.
package testaddr

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// The blocks: the second octet runs from firstA to lastA, the third over
// every value.
const (
	firstA = 64
	lastA  = 127
	blocks = (lastA - firstA + 1) * 256
)

// Reserved are the fixed addresses that tests or their fixtures depend on;
// no block contains them (TestBlocksAvoidReserved). The upgrade fixtures'
// data dirs name their node's Raft address (cluster/testdata/README.md),
// and the local cluster scripts use 127.0.0.x.
var Reserved = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/24"),   // scripts/cluster.sh, bench.sh, capacity.sh, bigstate.sh
	netip.MustParsePrefix("127.0.120.5/32"), // legacy-inmem-v1.tar.gz
	netip.MustParsePrefix("127.0.120.6/32"), // store-format1.tar.gz
}

var (
	// ErrExhausted means every block is held by a running test.
	ErrExhausted = errors.New("every loopback block is held by a running test")
	// errHeld means another holder has the block.
	errHeld = errors.New("block held")
)

// Block is 127.A.B.1-254 and an iptables chain tag, held by one test.
type Block struct {
	a, b byte
	lock *os.File
}

// next spreads the first block each acquisition tries, so that processes
// started together rarely try the same files in the same order.
var next atomic.Uint32

func init() { next.Store(uint32(os.Getpid()) * 97) }

// New takes a free block for t and gives it back when t ends (after the
// cleanups t registers later, which stop what listens on it).
func New(t testing.TB) *Block {
	t.Helper()
	b, err := Acquire(t.Name())
	if err != nil {
		t.Fatalf("testaddr: %v", err)
	}
	t.Cleanup(b.Release)
	return b
}

// Acquire takes a free block for holder, a name written into the block's
// lock file for whoever looks; Release gives it back.
func Acquire(holder string) (*Block, error) {
	start := next.Add(1)
	for i := range uint32(blocks) {
		n := (start + i) % blocks
		b, err := lockBlock(byte(firstA+n/256), byte(n%256))
		if errors.Is(err, errHeld) {
			continue
		}
		if err != nil {
			return nil, err
		}
		// The holder's name is for a person looking at the lock files;
		// nothing reads it back, so a failed write is no reason to fail.
		_ = b.lock.Truncate(0)
		_, _ = fmt.Fprintf(b.lock, "%s, pid %d\n", strings.TrimSpace(holder), os.Getpid())
		return b, nil
	}
	return nil, ErrExhausted
}

// lockBlock takes block 127.a.b if it is free.
func lockBlock(a, b byte) (*Block, error) {
	blk := &Block{a: a, b: b}
	dir := filepath.Join(os.TempDir(), "idemnode-testaddr")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("lock dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, blk.Prefix()+".lock"), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("lock block %s: %w", blk.Prefix(), err)
	}
	// flock, not fcntl locks: it conflicts between two opens of the file in
	// one process too, so parallel tests of one binary exclude each other.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errHeld
		}
		return nil, fmt.Errorf("lock block %s: %w", blk.Prefix(), err)
	}
	blk.lock = f
	return blk, nil
}

// Release gives the block back. The caller has stopped everything that
// listens on it.
func (b *Block) Release() {
	if b.lock != nil {
		b.lock.Close()
		b.lock = nil
	}
}

// Prefix is the block's first three octets, "127.A.B".
func (b *Block) Prefix() string { return fmt.Sprintf("127.%d.%d", b.a, b.b) }

// IP returns the block's address 127.A.B.host; host is 1-254.
func (b *Block) IP(host int) string {
	if host < 1 || host > 254 {
		panic(fmt.Sprintf("testaddr: host %d outside 1-254", host))
	}
	return fmt.Sprintf("%s.%d", b.Prefix(), host)
}

// NetIP is IP as a net.IP, for binding the source of a connection.
func (b *Block) NetIP(host int) net.IP { return net.ParseIP(b.IP(host)) }

// Addr returns IP(host):port.
func (b *Block) Addr(host, port int) string { return net.JoinHostPort(b.IP(host), fmt.Sprint(port)) }

// Chain is the tag of the block's iptables chain (netfault.New makes it
// IDEMNODE-<tag>): unique while the block is held, short enough for the
// kernel's 28 characters, and the same for the next holder, which removes a
// chain a killed holder left behind.
func (b *Block) Chain() string { return fmt.Sprintf("A%d-%d", b.a, b.b) }
