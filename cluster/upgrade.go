package cluster

import (
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/idemnode/idemnode/fsm"
)

// withinLevel returns c as every voter can apply it (see fitLevel).
func (n *Node) withinLevel(c *fsm.Command) (*fsm.Command, error) {
	fitted, withheld, err := fitLevel(c, n.appliedEverywhere)
	if withheld != nil {
		if n.metrics != nil {
			n.metrics.tombstonesWithheld.Inc()
		}
		n.warnWithheld(withheld)
	}
	return fitted, err
}

// fitLevel returns c if every voter applies its level (applies returns nil
// for it). Otherwise it drops what needs the newer level, as long as the
// operation stays the caller's: a Claim goes out without watching for
// abandonment (level 3), and a Claim or Complete without its tombstone time
// (level 2), and withheld says why the tombstone time was dropped. Both are
// settings of the cluster, not the caller's operation, and refusing a
// Complete after the side effect ran would leave its response unstored. A
// Checkpoint has no such fallback and is refused (ErrUpgrading).
func fitLevel(c *fsm.Command, applies func(level int) error) (fitted *fsm.Command, withheld, err error) {
	fitted = c
	for level := fsm.LevelOf(c); level > fsm.BaseLevel; level = fsm.LevelOf(fitted) {
		why := applies(level)
		if why == nil {
			break
		}
		plain := *fitted
		switch {
		case level == 3 && plain.WatchAbandon:
			plain.WatchAbandon = false
		case level == 2 && plain.Tombstone > 0 && (c.Type == fsm.TypeClaim || c.Type == fsm.TypeComplete):
			plain.Tombstone, withheld = 0, why
		default:
			return nil, nil, why
		}
		fitted = &plain
	}
	return fitted, withheld, nil
}

// warnWithheld logs, at most once a minute, that tombstone times are
// withheld (a voter runs an older release).
func (n *Node) warnWithheld(why error) {
	now := time.Now().UnixNano()
	last := n.withheldWarned.Load()
	if now-last < int64(time.Minute) || !n.withheldWarned.CompareAndSwap(last, now) {
		return
	}
	n.log.Warn("tombstone times withheld until every voter runs this release: records written meanwhile keep none", "why", why)
}

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
