package store

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports Pebble's metrics of the store current() returns (the
// store changes when a snapshot is installed), read at scrape time.
type Collector struct {
	current func() *Store
	descs   map[string]*prometheus.Desc
}

var collected = []struct {
	name, help string
	counter    bool
	value      func(m stats) float64
}{
	{"idemnode_store_key_filter_fill", "Fraction of the key filter's bits set: past 0.5, more lookups of fresh keys reach the disk (raise --key-filter-size).", false,
		func(m stats) float64 { return m.filterFill }},
	{"idemnode_store_key_filter_builds_total", "Key filters built since the store opened: at open, then each time deleted keys filled it.", true,
		func(m stats) float64 { return float64(m.filtersBuilt) }},
	{"idemnode_store_disk_bytes", "Bytes the store's files take on disk.", false,
		func(m stats) float64 { return float64(m.DiskSpaceUsage()) }},
	{"idemnode_store_compactions_total", "Compactions the store ran since it opened.", true,
		func(m stats) float64 { return float64(m.Compact.Count) }},
	{"idemnode_store_flushes_total", "Memtable flushes since the store opened.", true,
		func(m stats) float64 { return float64(m.Flush.Count) }},
	{"idemnode_store_l0_files", "Files in level 0: many of them slow reads down.", false,
		func(m stats) float64 { return float64(m.Levels[0].TablesCount) }},
	{"idemnode_store_compaction_debt_bytes", "Bytes compactions estimate they must still rewrite to reach a healthy shape.", false,
		func(m stats) float64 { return float64(m.Compact.EstimatedDebt) }},
	{"idemnode_store_read_amplification", "Sorted runs a read may have to look in.", false,
		func(m stats) float64 { return float64(m.ReadAmp()) }},
	{"idemnode_store_block_cache_bytes", "Bytes in the block cache.", false,
		func(m stats) float64 { return float64(m.BlockCache.Size) }},
	{"idemnode_store_block_cache_hits_total", "Block cache hits.", true,
		func(m stats) float64 { return float64(m.BlockCache.Hits) }},
	{"idemnode_store_block_cache_misses_total", "Block cache misses.", true,
		func(m stats) float64 { return float64(m.BlockCache.Misses) }},
	{"idemnode_store_memtable_bytes", "Bytes the memtables hold.", false,
		func(m stats) float64 { return float64(m.MemTable.Size) }},
	{"idemnode_store_memtables", "Memtables held (the one written to and those being flushed).", false,
		func(m stats) float64 { return float64(m.MemTable.Count) }},
}

// stats is what one scrape reads of a store.
type stats struct {
	*pebble.Metrics
	filterFill   float64
	filtersBuilt int64
}

// NewCollector returns a collector of current's metrics; current may
// return nil (no Pebble store), and nothing is collected then.
func NewCollector(current func() *Store) *Collector {
	c := &Collector{current: current, descs: map[string]*prometheus.Desc{}}
	for _, m := range collected {
		c.descs[m.name] = prometheus.NewDesc(m.name, m.help, nil, nil)
	}
	return c
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect reads the store's metrics once and sends each.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.current()
	if s == nil {
		return
	}
	m := s.Metrics()
	if m == nil {
		return // replaced by an installed snapshot while this scrape ran
	}
	st := stats{Metrics: m}
	st.filterFill, st.filtersBuilt = s.KeyFilter()
	for _, x := range collected {
		kind := prometheus.GaugeValue
		if x.counter {
			kind = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(c.descs[x.name], kind, x.value(st))
	}
}
