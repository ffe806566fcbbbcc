package cluster

import (
	"encoding/json"
	"slices"
	"testing"

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
