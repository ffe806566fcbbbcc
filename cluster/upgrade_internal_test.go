package cluster

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/idemnode/idemnode/fsm"
)

// TestNewCommandsWaitForEveryVoter: a command type newer than the base is
// proposed only when every other voter gossips a release that applies it;
// one that gossips nothing of it (an older release), or that gossip has
// not seen, holds it back, and non-voters do not count.
func TestNewCommandsWaitForEveryVoter(t *testing.T) {
	gossiped := func(applies int) Member {
		meta, _ := json.Marshal(memberMeta{Version: 1, Raft: "r", Applies: applies})
		return memberOf(&memberlist.Node{Name: "x", Meta: meta})
	}
	table := map[string]Member{
		"new":  gossiped(int(fsm.LastType)),
		"old":  gossiped(0), // a release before the field existed
		"self": gossiped(0),
	}
	member := func(id string) (Member, bool) { m, ok := table[id]; return m, ok }
	voter := func(id string) raft.Server { return raft.Server{ID: raft.ServerID(id), Suffrage: raft.Voter} }
	for _, tc := range []struct {
		name    string
		servers []raft.Server
		t       fsm.CommandType
		want    []string
	}{
		{"all upgraded", []raft.Server{voter("self"), voter("new")}, fsm.TypeCheckpoint, nil},
		{"an older voter", []raft.Server{voter("self"), voter("new"), voter("old")}, fsm.TypeCheckpoint, []string{"old"}},
		{"a voter gossip has not seen", []raft.Server{voter("self"), voter("unseen")}, fsm.TypeCheckpoint, []string{"unseen"}},
		{"an older non-voter", []raft.Server{voter("self"), {ID: "old", Suffrage: raft.Nonvoter}}, fsm.TypeCheckpoint, nil},
		{"base commands go everywhere", []raft.Server{voter("self"), voter("old")}, fsm.BaseType, nil},
	} {
		if got := olderVoters(tc.servers, "self", member, tc.t); !slices.Equal(got, tc.want) {
			t.Errorf("%s: older voters %v, want %v", tc.name, got, tc.want)
		}
	}
}
