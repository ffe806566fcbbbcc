package cluster

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/idemnode/idemnode/fsm"
)

// TestNewCommandsWaitForEveryVoter: a command of a level above the base is
// proposed only when every other voter gossips a release that applies it;
// one that gossips nothing of it (an older release), or that gossip has
// not seen, holds it back, and non-voters do not count.
func TestNewCommandsWaitForEveryVoter(t *testing.T) {
	gossiped := func(applies int) Member {
		meta, _ := json.Marshal(memberMeta{Version: 1, Raft: "r", Applies: applies})
		return memberOf(&memberlist.Node{Name: "x", Meta: meta})
	}
	table := map[string]Member{
		"new":  gossiped(fsm.LastLevel),
		"old":  gossiped(0), // a release before the field existed
		"self": gossiped(0),
	}
	member := func(id string) (Member, bool) { m, ok := table[id]; return m, ok }
	voter := func(id string) raft.Server { return raft.Server{ID: raft.ServerID(id), Suffrage: raft.Voter} }
	for _, tc := range []struct {
		name    string
		servers []raft.Server
		level   int
		want    []string
	}{
		{"all upgraded", []raft.Server{voter("self"), voter("new")}, fsm.LastLevel, nil},
		{"an older voter", []raft.Server{voter("self"), voter("new"), voter("old")}, fsm.LastLevel, []string{"old"}},
		{"a voter gossip has not seen", []raft.Server{voter("self"), voter("unseen")}, fsm.LastLevel, []string{"unseen"}},
		{"an older non-voter", []raft.Server{voter("self"), {ID: "old", Suffrage: raft.Nonvoter}}, fsm.LastLevel, nil},
		{"base commands go everywhere", []raft.Server{voter("self"), voter("old")}, fsm.BaseLevel, nil},
	} {
		if got := olderVoters(tc.servers, "self", member, tc.level); !slices.Equal(got, tc.want) {
			t.Errorf("%s: older voters %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestFitLevel: while a voter is older, a Claim or Complete goes out
// without its tombstone time (the operation must not fail for a setting),
// a Checkpoint is refused, and base commands pass untouched.
func TestFitLevel(t *testing.T) {
	older := func(int) error { return ErrUpgrading }
	everyone := func(int) error { return nil }
	claim := &fsm.Command{Type: fsm.TypeClaim, Owner: "o", Tombstone: int64(time.Hour)}
	fitted, withheld, err := fitLevel(claim, older)
	if err != nil || withheld == nil || fitted.Tombstone != 0 || fitted.Owner != "o" || claim.Tombstone == 0 {
		t.Fatalf("claim with an older voter: %+v, withheld %v, err %v (the caller's command must stay as it was)", fitted, withheld, err)
	}
	if fitted, withheld, err := fitLevel(claim, everyone); err != nil || withheld != nil || fitted != claim {
		t.Fatalf("claim when every voter is up to date: %+v %v %v", fitted, withheld, err)
	}
	cp := &fsm.Command{Type: fsm.TypeCheckpoint, Checkpoint: &fsm.Checkpoint{Point: "p"}}
	if _, _, err := fitLevel(cp, older); !errors.Is(err, ErrUpgrading) {
		t.Fatalf("checkpoint with an older voter: %v, want ErrUpgrading", err)
	}
	// A voter that applies level 2 but not 3: the claim keeps its
	// tombstone time and goes out without watching for abandonment.
	level2 := func(level int) error {
		if level > 2 {
			return ErrUpgrading
		}
		return nil
	}
	watching := &fsm.Command{Type: fsm.TypeClaim, Owner: "o", Tombstone: int64(time.Hour), WatchAbandon: true}
	fitted, withheld, err = fitLevel(watching, level2)
	if err != nil || withheld != nil || fitted.WatchAbandon || fitted.Tombstone == 0 || !watching.WatchAbandon {
		t.Fatalf("watching claim with a level-2 voter: %+v, withheld %v, err %v", fitted, withheld, err)
	}
	fitted, withheld, err = fitLevel(watching, older)
	if err != nil || withheld == nil || fitted.WatchAbandon || fitted.Tombstone != 0 {
		t.Fatalf("watching claim with an older voter: %+v, withheld %v, err %v", fitted, withheld, err)
	}
	plain := &fsm.Command{Type: fsm.TypeComplete}
	if fitted, _, err := fitLevel(plain, func(int) error { t.Fatal("base commands need no check"); return nil }); err != nil || fitted != plain {
		t.Fatalf("plain complete: %+v %v", fitted, err)
	}
}
