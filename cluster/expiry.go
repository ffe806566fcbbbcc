package cluster

import (
	"context"
	"time"

	"github.com/hashicorp/raft"

	"github.com/idemnode/idemnode/clock"
	"github.com/idemnode/idemnode/fsm"
)

// runExpiry is the leader's expiry ticker. Deleting expired records goes
// through the log like any write (as Consul reaps tombstones), so every
// node deletes the same records at the same point. The ticker runs on the
// node's clock: a test that advances a fake clock past a TTL also brings
// the next Expire proposal.
func (n *Node) runExpiry(t clock.Ticker) {
	defer n.wg.Done()
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C():
			n.expireDue()
		}
	}
}

// expireDue proposes Expire entries while this node leads and records are
// due (expired, or abandoned: fsm/abandon.go), each bounded by ExpiryLimit
// so expiry never stalls other writes.
func (n *Node) expireDue() {
	for n.raft.State() == raft.Leader {
		next, ok := n.Machine().NextExpiry()
		if !ok || next > n.now() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := n.Apply(ctx, &fsm.Command{Type: fsm.TypeExpire, Limit: n.cfg.ExpiryLimit})
		cancel()
		if err != nil {
			n.log.Warn("propose expire", "err", err)
			return
		}
		n.metrics.expired.Add(float64(res.Expired - res.Tombstoned))
		// A record marked abandoned and expired at once counts twice: at
		// worst one more Expire, which finds less to do.
		if res.Expired+res.Abandoned < int(n.cfg.ExpiryLimit) {
			return
		}
	}
}
