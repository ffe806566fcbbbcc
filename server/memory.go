package server

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/idemnode/idemnode/store"
)

// DefaultMemoryLimit is serve's --memory-limit default: the budget a
// node's memory stays within, whatever it stores (docs/OPERATIONS.md).
const DefaultMemoryLimit = 512 << 20

// nodeMemory is what a node holds besides its store: Raft's log cache (64
// entries: small unless the responses are) and entries in flight, gRPC's
// buffers, the runtime's own structures.
const nodeMemory = 64 << 20

// codeMemory is held back from the Go runtime's limit for what the
// resident set counts and the runtime does not: the binary's code.
const codeMemory = 32 << 20

// storeOptions are the store's memory settings.
func (c *Config) storeOptions() store.Options {
	return store.Options{CacheSize: c.CacheSize, MemTableSize: uint64(c.MemTableSize), KeyFilterSize: c.KeyFilterSize}
}

// checkMemory refuses a memory limit that the store's parts and the rest of
// the node could outgrow: the Go runtime would then collect garbage without
// end instead of failing clearly. No limit (0) is not checked.
func (c *Config) checkMemory() error {
	if c.MemoryLimit == 0 {
		return nil
	}
	// The defaults the store fills in count as they will be used.
	o := c.storeOptions()
	cache, memtable, filter := orInt64(c.CacheSize, store.DefaultCacheSize), orInt64(c.MemTableSize, store.DefaultMemTableSize),
		orInt64(c.KeyFilterSize, store.DefaultKeyFilterSize)
	o.CacheSize, o.MemTableSize, o.KeyFilterSize = cache, uint64(memtable), filter
	bound := o.MemoryBound()
	need := bound + nodeMemory + codeMemory
	if c.MemoryLimit >= need {
		return nil
	}
	return fmt.Errorf("--memory-limit %s is below the %s a node may hold: its store up to %s (--cache-size %s, "+
		"four of --memtable-size %s, two write batches, two of --key-filter-size %s, the records due soon, the tables' write buffers), %s for Raft and gRPC and "+
		"%s for its code; raise --memory-limit or lower those", mib(c.MemoryLimit, false), mib(need, true),
		mib(bound, true), mib(cache, true), mib(memtable, true), mib(filter, true),
		mib(nodeMemory, true), mib(codeMemory, true))
}

func orInt64(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}

// applyMemoryLimit sets the Go runtime's soft memory limit below the
// budget, so that the garbage collector runs before the heap's growth (by
// default up to twice what is live) takes the node past it.
func applyMemoryLimit(limit int64, log *slog.Logger) {
	if limit == 0 {
		return
	}
	if env := os.Getenv("GOMEMLIMIT"); env != "" {
		log.Warn("GOMEMLIMIT is ignored: --memory-limit sets the runtime's limit", "GOMEMLIMIT", env, "memory_limit", mib(limit, false))
	}
	debug.SetMemoryLimit(RuntimeMemoryLimit(limit))
}

// RuntimeMemoryLimit is the Go runtime's soft limit for a memory budget:
// the budget less what the runtime does not count (the code).
func RuntimeMemoryLimit(budget int64) int64 { return budget - codeMemory }

// mib writes n bytes in MiB, rounded up or down: a limit is rounded down
// and a need up, so a limit refused never reads as large as the need.
func mib(n int64, up bool) string {
	if up {
		n += 1<<20 - 1
	}
	return fmt.Sprintf("%dMiB", n>>20)
}
