package cluster

import (
	"fmt"
	"strings"

	"github.com/hashicorp/raft"
)

// appliedEverywhere returns nil when every voter of the Raft configuration
// runs a release that applies commands of level, as its gossip says, and
// ErrUpgrading otherwise. A node that met an entry it cannot decode would
// stop; with two of three stopping mid-upgrade, the cluster would too. A
// voter gossip has not seen since this node started counts as old: a new
// command waits until it is heard from. A standalone node (no gossip) is
// the only voter and runs this release.
func (n *Node) appliedEverywhere(level int) error {
	if n.members == nil {
		return nil
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("read the configuration: %w", err)
	}
	old := olderVoters(f.Configuration().Servers, n.cfg.NodeID, n.members.member, level)
	if len(old) > 0 {
		return fmt.Errorf("%w (a level %d command; older: %s)", ErrUpgrading, level, strings.Join(old, ", "))
	}
	return nil
}

// olderVoters lists the voters other than self that member does not know
// to apply commands of level.
func olderVoters(servers []raft.Server, self string, member func(id string) (Member, bool), level int) []string {
	var old []string
	for _, s := range servers {
		if s.Suffrage != raft.Voter || string(s.ID) == self {
			continue
		}
		if m, ok := member(string(s.ID)); !ok || m.Applies < level {
			old = append(old, string(s.ID))
		}
	}
	return old
}
