package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/idemnode/idemnode/store"
)

// DefaultMemoryLimit is --memory-limit's default: the budget a node's
// memory stays within, whatever it stores (docs/OPERATIONS.md).
const DefaultMemoryLimit = 512 << 20

// nodeMemory is what a node holds besides its store: Raft's log cache (64
// entries: small unless the responses are) and entries in flight, gRPC's
// buffers, the runtime's own structures.
const nodeMemory = 64 << 20

// codeMemory is held back from the Go runtime's limit for what the
// resident set counts and the runtime does not: the binary's code.
const codeMemory = 32 << 20

// storeOptions are the store's memory settings from the flags.
func (f *serveFlags) storeOptions() store.Options {
	return store.Options{CacheSize: f.cacheSize, MemTableSize: uint64(f.memtableSize), KeyFilterSize: f.keyFilterSize}
}

// checkMemory refuses a --memory-limit that the store's parts and the rest
// of the node could outgrow: the Go runtime would then collect garbage
// without end instead of failing clearly.
func (f *serveFlags) checkMemory() error {
	bound := f.storeOptions().MemoryBound()
	need := bound + nodeMemory + codeMemory
	if f.memoryLimit >= need {
		return nil
	}
	return fmt.Errorf("--memory-limit %s is below the %s a node may hold: its store up to %s (--cache-size %s, "+
		"four of --memtable-size %s, two write batches, two of --key-filter-size %s, the records due soon, the tables' write buffers), %s for Raft and gRPC and "+
		"%s for its code; raise --memory-limit or lower those", mib(f.memoryLimit, false), mib(need, true),
		mib(bound, true), mib(f.cacheSize, true), mib(f.memtableSize, true), mib(f.keyFilterSize, true),
		mib(nodeMemory, true), mib(codeMemory, true))
}

// applyMemoryLimit sets the Go runtime's soft memory limit below
// --memory-limit, so that the garbage collector runs before the heap's
// growth (by default up to twice what is live) takes the node past it.
func applyMemoryLimit(limit int64, log *slog.Logger) {
	if env := os.Getenv("GOMEMLIMIT"); env != "" {
		log.Warn("GOMEMLIMIT is ignored: --memory-limit sets the runtime's limit", "GOMEMLIMIT", env, "memory_limit", mib(limit, false))
	}
	debug.SetMemoryLimit(limit - codeMemory)
}

// mib writes n bytes in MiB, rounded up or down: a limit is rounded down
// and a need up, so a limit refused never reads as large as the need.
func mib(n int64, up bool) string {
	if up {
		n += 1<<20 - 1
	}
	return fmt.Sprintf("%dMiB", n>>20)
}
