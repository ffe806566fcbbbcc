package testaddr

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestBlocksAreExclusive: a block held is not handed out again, in this
// process or another, until it is released or its holder dies.
func TestBlocksAreExclusive(t *testing.T) {
	held := map[string]bool{}
	var mine []*Block
	for range 50 {
		b := New(t)
		if held[b.Prefix()] {
			t.Fatalf("block %s handed out twice", b.Prefix())
		}
		held[b.Prefix()] = true
		mine = append(mine, b)
	}

	// Another process tries to take every one of them while they are held.
	var prefixes []string
	for p := range held {
		prefixes = append(prefixes, p)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperTakeBlocks$")
	cmd.Env = append(os.Environ(), "TESTADDR_HELD="+strings.Join(prefixes, " "))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper process: %v\n%s", err, out)
	}
	if got := strings.Count(string(out), "took="); got > 0 || !strings.Contains(string(out), "refused=") {
		t.Fatalf("another process took %d held blocks:\n%s", got, out)
	}

	// Released, a block is free again (the lock file stays; its lock does not).
	first := mine[0]
	first.Release()
	again, err := lockBlock(first.a, first.b)
	if err != nil {
		t.Fatalf("block %s after its release: %v", first.Prefix(), err)
	}
	again.Release()
}

// TestHelperTakeBlocks is the other process of TestBlocksAreExclusive: it
// tries to lock each block it is given and says which it got.
func TestHelperTakeBlocks(t *testing.T) {
	held := os.Getenv("TESTADDR_HELD")
	if held == "" {
		t.Skip("run by TestBlocksAreExclusive")
	}
	for _, p := range strings.Fields(held) {
		var a, b byte
		if _, err := fmt.Sscanf(p, "127.%d.%d", &a, &b); err != nil {
			t.Fatal(err)
		}
		blk, err := lockBlock(a, b)
		switch {
		case errors.Is(err, errHeld):
			fmt.Println("refused=" + p)
		case err != nil:
			t.Fatal(err)
		default:
			fmt.Println("took=" + p)
			blk.Release()
		}
	}
}

// TestBlocksAvoidReserved: no address of any block is reserved.
func TestBlocksAvoidReserved(t *testing.T) {
	for n := range blocks {
		b := &Block{a: byte(firstA + n/256), b: byte(n % 256)}
		for _, host := range []int{1, 254} {
			ip := netip.MustParseAddr(b.IP(host))
			for _, r := range Reserved {
				if r.Contains(ip) {
					t.Fatalf("%s is reserved (%s)", ip, r)
				}
			}
		}
		if len("IDEMNODE-"+b.Chain()) > 28 {
			t.Fatalf("chain IDEMNODE-%s is longer than iptables allows", b.Chain())
		}
	}
}
