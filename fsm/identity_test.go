package fsm

import (
	"bytes"
	"errors"
	"testing"
)

func identify(id string, now int64) *Command {
	return &Command{Type: TypeIdentify, Now: now, Cluster: []byte(id)}
}

// TestIdentityIsSetOnce: the first Identify applied sets the identity; a
// later one, from another leader, leaves it and is told so, and neither
// FSM time nor the digest moves (a restored backup, which gets a new
// identity, and an upgraded state still show the digest they had).
func TestIdentityIsSetOnce(t *testing.T) {
	h := newHarness(t)
	h.mustWin("a", "o1", at(0))
	digest := h.m.Digest()
	if got := h.m.Cluster(); got != nil {
		t.Fatalf("a new state has identity %x", got)
	}
	h.want(h.apply(identify("first-cluster-id", at(50))), OutcomeOK)
	h.want(h.apply(identify("other-cluster-id", at(0))), OutcomeMismatch)
	h.want(h.apply(batch(identify("first-cluster-id", at(0)))), OutcomeOK)
	if got := string(h.m.Cluster()); got != "first-cluster-id" {
		t.Fatalf("identity %q, want the first one applied", got)
	}
	if h.m.Digest() != digest {
		t.Fatalf("the identity changed the digest (FSM time %d, was %d)", h.m.Now(), at(0))
	}
	if LevelOf(identify("x", 0)) != 4 || LevelOf(batch(claim("k", "o", 0), identify("x", 0))) != 4 {
		t.Fatal("Identify must wait for every voter to apply level 4")
	}
}

// TestIdentifyEncoding: the command round-trips, and an identity that is
// empty or too long does not decode (nothing could check it).
func TestIdentifyEncoding(t *testing.T) {
	c := identify("0123456789abcdef", at(5))
	back, err := DecodeCommand(EncodeCommand(c))
	if err != nil || back.Type != TypeIdentify || !bytes.Equal(back.Cluster, c.Cluster) || back.Now != c.Now {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	for _, id := range []string{"", string(make([]byte, MaxClusterID+1))} {
		if _, err := DecodeCommand(EncodeCommand(identify(id, 0))); !errors.Is(err, ErrMalformed) {
			t.Errorf("identity of %d bytes decoded: %v", len(id), err)
		}
	}
}

// TestMetaKeepsTheIdentity: the store's metadata carries the identity
// beside the feed's fields, and metadata written before either decodes
// as it did. Fields out of order are refused.
func TestMetaKeepsTheIdentity(t *testing.T) {
	for _, m := range []Meta{
		{Applied: 7, Term: 2},
		{Applied: 7, Cluster: []byte("c1")},
		{Applied: 7, Feed: FeedMeta{Seq: 3, Events: 3}, Cluster: []byte("c1")},
	} {
		enc, _ := m.MarshalBinary()
		var back Meta
		if err := back.UnmarshalBinary(enc); err != nil {
			t.Fatalf("decode %+v: %v", m, err)
		}
		if back.Applied != m.Applied || back.Feed != m.Feed || !bytes.Equal(back.Cluster, m.Cluster) {
			t.Fatalf("round trip %+v: %+v", m, back)
		}
	}
	plain, _ := Meta{Applied: 1}.MarshalBinary()
	swapped := append(append(bytes.Clone(plain), metaFieldCluster, 1, 'x', metaFieldFeed), make([]byte, 6)...)
	if err := new(Meta).UnmarshalBinary(swapped); !errors.Is(err, ErrMalformed) {
		t.Fatalf("fields out of order: %v", err)
	}
}

// TestIdentityTravelsInSnapshots: a state with an identity streams as
// version 5 and a follower that installs it holds the identity; a state
// without one streams as before; a restore that names an identity (a
// backup seeding a new cluster) replaces the stream's.
func TestIdentityTravelsInSnapshots(t *testing.T) {
	h := newHarness(t)
	h.apply(watched("a", "o1", lease10, ttl100, at(0)))
	if v := snapshotBytes(t, h.m)[len(snapshotMagic)]; v != snapshotVersionNoFeed {
		t.Fatalf("a state without identity or events streams as version %d", v)
	}
	h.apply(identify("cluster-a", at(1)))
	snap := snapshotBytes(t, h.m)
	if snap[len(snapshotMagic)] != SnapshotVersion {
		t.Fatalf("a state with an identity streams as version %d", snap[len(snapshotMagic)])
	}
	if int64(len(snap)) != SnapshotSize(h.m.Meta()) {
		t.Fatalf("stream of %d bytes, SnapshotSize says %d", len(snap), SnapshotSize(h.m.Meta()))
	}
	follower := NewMachine()
	follower.applyIdentityForTest("stale")
	if err := follower.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if string(follower.Cluster()) != "cluster-a" || follower.Digest() != h.m.Digest() {
		t.Fatalf("installed: identity %q digest %s, want cluster-a and %s", follower.Cluster(), follower.Digest(), h.m.Digest())
	}
	seeded := NewMachine()
	info, err := seeded.RestoreWith(bytes.NewReader(snap), Meta{Term: 1, Cluster: []byte("cluster-b")})
	if err != nil || string(seeded.Cluster()) != "cluster-b" || string(info.Meta.Cluster) != "cluster-b" {
		t.Fatalf("seeded: identity %q, %v", seeded.Cluster(), err)
	}
	// Events and an identity together: both survive.
	h.apply(expire(10, at(100)))
	snap = snapshotBytes(t, h.m)
	back := restored(t, snap)
	if string(back.Cluster()) != "cluster-a" || back.Meta().Feed != h.m.Meta().Feed {
		t.Fatalf("with events: identity %q feed %+v, want %+v", back.Cluster(), back.Meta().Feed, h.m.Meta().Feed)
	}
}

// applyIdentityForTest gives m an identity through the log, as a leader would.
func (m *Machine) applyIdentityForTest(id string) {
	m.Apply(m.Applied()+1, identify(id, 0))
}
