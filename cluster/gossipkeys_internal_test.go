package cluster

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"

	"github.com/idemnode/idemnode/internal/testaddr"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

// TestKeyringsThatUnderstandEachOther: memberlist encrypts with the primary
// key only and decrypts with any key of the ring, so two nodes hear each
// other exactly when each ring holds the other's primary. A join is one
// push/pull exchange over TCP, encrypted both ways, so it answers at once.
// The rows are the states of a rotation from A to B, and the ones that
// break it.
func TestKeyringsThatUnderstandEachOther(t *testing.T) {
	a, b := key('a'), key('b')
	addrs := testaddr.New(t)
	for i, tc := range []struct {
		name string
		x, y [][]byte
		talk bool
	}{
		{"same key", [][]byte{a}, [][]byte{a}, true},
		{"round 1: B added as secondary on one side", [][]byte{a, b}, [][]byte{a}, true},
		{"round 2: B primary on one side", [][]byte{b, a}, [][]byte{a, b}, true},
		{"round 3: A dropped on one side", [][]byte{b}, [][]byte{b, a}, true},
		{"B primary before the other knows B", [][]byte{b, a}, [][]byte{a}, false},
		{"A dropped before the other uses B", [][]byte{b}, [][]byte{a, b}, false},
		{"different keys", [][]byte{a}, [][]byte{b}, false},
		{"plaintext against a keyring", [][]byte{a}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := mustMembership(t, fmt.Sprintf("x%d", i), addrs.IP(2*i+1)+":0", tc.x)
			y := mustMembership(t, fmt.Sprintf("y%d", i), addrs.IP(2*i+2)+":0", tc.y)
			for _, dir := range [][2]*membership{{x, y}, {y, x}} {
				n, err := dir[0].list.Join([]string{dir[1].list.LocalNode().Address()})
				if talk := err == nil && n == 1; talk != tc.talk {
					t.Errorf("join %s -> %s: contacted %d, err %v; want them to talk: %v",
						dir[0].list.LocalNode().Name, dir[1].list.LocalNode().Name, n, err, tc.talk)
				}
			}
		})
	}
}

func mustMembership(t *testing.T, id, addr string, keys [][]byte) *membership {
	t.Helper()
	m, err := newMembership(Config{NodeID: id, GossipAddr: addr, GossipProfile: "local", GossipKeys: keys},
		memberMeta{Version: 1, Raft: addr}, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.shutdown() })
	return m
}

// TestDropUnlisted: the ring ends up holding exactly the listed keys, the
// primary untouched, whatever the order of the keys to drop.
func TestDropUnlisted(t *testing.T) {
	a, b, c, d := key('a'), key('b'), key('c'), key('d')
	for _, tc := range []struct {
		ring, keep [][]byte
	}{
		{[][]byte{a, b, c}, [][]byte{a}},
		{[][]byte{a, b, c}, [][]byte{a, c}},
		{[][]byte{a, b, c, d}, [][]byte{a, d, b}},
		{[][]byte{a, b}, [][]byte{a, b}},
	} {
		kr, err := memberlist.NewKeyring(tc.ring[1:], tc.ring[0])
		if err != nil {
			t.Fatal(err)
		}
		dropUnlisted(kr, tc.keep)
		got := kr.GetKeys()
		if !bytes.Equal(got[0], tc.ring[0]) || len(got) != len(tc.keep) {
			t.Errorf("ring %q keep %q: got %q", tc.ring, tc.keep, got)
			continue
		}
		for _, k := range tc.keep {
			if !slices.ContainsFunc(got, func(g []byte) bool { return bytes.Equal(g, k) }) {
				t.Errorf("ring %q keep %q: %q lost", tc.ring, tc.keep, k)
			}
		}
	}
}

func TestParseGossipKeys(t *testing.T) {
	a, b := base64.StdEncoding.EncodeToString(key('a')), base64.StdEncoding.EncodeToString(key('b')[:16])
	keys, err := ParseGossipKeys("# rotation: b is next\n" + a + "\n\n  " + b + "  \n")
	if err != nil || len(keys) != 2 || !bytes.Equal(keys[0], key('a')) || !bytes.Equal(keys[1], key('b')[:16]) {
		t.Fatalf("ParseGossipKeys = %q, %v", keys, err)
	}
	for text, want := range map[string]string{
		"":                    "no gossip key",
		"# only a comment\n":  "no gossip key",
		a + "\nnot-base64!\n": "line 2 is not base64",
		base64.StdEncoding.EncodeToString([]byte("short")): "line 1 is 5 bytes",
	} {
		if _, err := ParseGossipKeys(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseGossipKeys(%q) = %v, want an error with %q", text, err, want)
		}
	}
}
