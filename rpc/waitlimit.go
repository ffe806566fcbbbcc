package rpc

import (
	"fmt"
	"sync"
)

// tooManyWaits refuses a wait beyond a cap of Limits (ResourceExhausted).
type tooManyWaits struct {
	scope string // "node" or "tenant"
	limit int
}

func (e *tooManyWaits) Error() string {
	return fmt.Sprintf("too many waiting calls on this %s (limit: %d); retry later or without waiting", e.scope, e.limit)
}

// waitCounter counts the calls this node holds waiting, in all and per
// tenant, so that MaxWaitsPerNode and MaxWaitsPerTenant can refuse more.
// A held wait costs a goroutine and a shared watch channel; the caps bound
// what one node, or one noisy tenant, can pile up.
type waitCounter struct {
	// mu guards total and byTenant; taking a slot must check both caps and
	// count both at once.
	mu       sync.Mutex
	total    int
	byTenant map[string]int
}

// acquire takes a slot for tenant, or refuses with *tooManyWaits. The
// returned release gives the slot back and must be called exactly once.
func (w *waitCounter) acquire(tenant string, perNode, perTenant int) (release func(), err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if perNode > 0 && w.total >= perNode {
		return nil, &tooManyWaits{scope: "node", limit: perNode}
	}
	if perTenant > 0 && w.byTenant[tenant] >= perTenant {
		return nil, &tooManyWaits{scope: "tenant", limit: perTenant}
	}
	if w.byTenant == nil {
		w.byTenant = map[string]int{}
	}
	w.total++
	w.byTenant[tenant]++
	var once sync.Once
	return func() { once.Do(func() { w.put(tenant) }) }, nil
}

func (w *waitCounter) put(tenant string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.total--
	if w.byTenant[tenant]--; w.byTenant[tenant] == 0 {
		delete(w.byTenant, tenant) // keep the map as small as the live tenants
	}
}

// active returns how many waits the node holds, in all and for tenant.
func (w *waitCounter) active(tenant string) (total, forTenant int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.total, w.byTenant[tenant]
}
