package cluster

import (
	"context"

	"github.com/idemnode/idemnode/store"
)

// newScrubber reads the node's store tables in the background
// (store/scrub.go), following the store an installed snapshot swaps in.
// A table that fails is logged with the remedy and counted on /metrics
// (idemnode_store_scrub_failures_total, alert IdemnodeStoreScrubFailed);
// the node keeps serving: what it serves is read through Pebble, which
// checks every block it reads and stops the node (exit 3) at a damaged
// one, so nothing wrong is served, and a node that stopped at once would
// only take away a replica that still answers everything else.
func (n *Node) newScrubber() *store.Scrubber {
	if n.cfg.StoreScrubPeriod < 0 {
		return nil
	}
	return store.NewScrubber(func() *store.Store {
		s, _ := n.Machine().Store().(*store.Store)
		return s
	}, store.ScrubOptions{Period: n.cfg.StoreScrubPeriod, OnFailure: func(path string, err error) {
		n.log.Error("a store table failed the background scrub: this node's copy of the state is damaged. "+
			"It keeps serving and stops (exit 3) if a read reaches the damaged block. "+
			"Recover: wipe this node's data dir and let it rejoin, while its peers are healthy (a single node: restore a backup)",
			"file", path, "err", err)
	}})
}

// runScrub scrubs until the node closes.
func (n *Node) runScrub(sc *store.Scrubber) {
	defer n.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-n.stop; cancel() }()
	sc.Run(ctx)
	cancel()
}
