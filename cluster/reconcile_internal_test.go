package cluster

import (
	"testing"

	"github.com/hashicorp/raft"
)

func TestQuorumSurvivesRemoval(t *testing.T) {
	voters := func(ids ...string) []raft.Server {
		var out []raft.Server
		for _, id := range ids {
			out = append(out, raft.Server{ID: raft.ServerID(id), Suffrage: raft.Voter})
		}
		return out
	}
	members := func(states map[string]string) []Member {
		var out []Member
		for id, st := range states {
			out = append(out, Member{ID: id, State: st})
		}
		return out
	}
	n := &Node{cfg: Config{NodeID: "a"}}
	cases := []struct {
		name    string
		servers []raft.Server
		states  map[string]string
		dead    string
		want    bool
	}{
		{"3 voters, one dead: 2 healthy of 2", voters("a", "b", "c"), map[string]string{"a": "alive", "b": "alive", "c": "dead"}, "c", true},
		{"5 voters, two dead: 3 healthy of 4", voters("a", "b", "c", "d", "e"), map[string]string{"a": "alive", "b": "alive", "c": "alive", "d": "dead", "e": "dead"}, "e", true},
		{"5 voters, three not healthy: 2 healthy of 4", voters("a", "b", "c", "d", "e"), map[string]string{"a": "alive", "b": "alive", "c": "dead", "d": "dead", "e": "dead"}, "e", false},
		{"4 voters, one left unknown: 2 healthy of 3", voters("a", "b", "c", "d"), map[string]string{"a": "alive", "b": "alive", "d": "dead"}, "d", true},
		{"3 voters, other also dead: 1 healthy of 2", voters("a", "b", "c"), map[string]string{"a": "alive", "b": "dead", "c": "dead"}, "c", false},
	}
	for _, tc := range cases {
		if got := n.quorumSurvives(tc.servers, members(tc.states), tc.dead); got != tc.want {
			t.Errorf("%s: quorumSurvives = %v, want %v", tc.name, got, tc.want)
		}
	}
}
