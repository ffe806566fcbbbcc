package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
)

// A background scrub of the store's tables.
//
// Pebble checks a block's checksum when it reads the block, so a flipped
// byte in a table is found only when a read reaches that block: a record
// read once a month, or a compaction's input. Until then the node looks
// healthy while its copy of the state is damaged, and its peers may lose
// theirs meanwhile. The scrub reads every live table and checks every
// block's checksum, spread over a period (a day by default), so damage is
// found within a period of happening.
//
// It reads the files itself, beside Pebble: nothing it reads enters the
// block cache (a reader without a cache), so the hot blocks stay, and a
// failure it finds is reported, not fatal; the node stops (exit 3) only if
// Pebble itself reads the damaged block, as before.
const (
	// DefaultScrubPeriod is how long a full pass over the tables takes
	// and how often one starts.
	DefaultScrubPeriod = 24 * time.Hour
	// scrubMinRate and scrubMaxRate bound the reading rate: a small store
	// is read quickly, then the scrub waits for the next period; a store
	// too large to read in a period at the ceiling takes longer.
	scrubMinRate = 1 << 20
	scrubMaxRate = 64 << 20
)

// ScrubOptions configure a Scrubber.
type ScrubOptions struct {
	// Period is the time a pass aims to take and the interval between
	// pass starts (DefaultScrubPeriod when 0).
	Period time.Duration
	// MinRate and MaxRate bound the reading rate in bytes per second
	// (1 MiB/s and 64 MiB/s when 0).
	MinRate, MaxRate int64
	// OnFailure is called for each table that failed its checksum or could
	// not be read.
	OnFailure func(path string, err error)
}

// Scrubber reads every table of the store current returns (it changes
// when a snapshot is installed) at a bounded rate and counts what it
// finds. It is a prometheus.Collector of its progress.
type Scrubber struct {
	current func() *Store
	opts    ScrubOptions

	bytes, passes, failures atomic.Int64
	lastPass                atomic.Int64 // Unix seconds of the last pass's end

	bytesDesc, passesDesc, failuresDesc, lastPassDesc *prometheus.Desc
}

// NewScrubber returns a scrubber of current's tables; current may return
// nil (no Pebble store), and a pass then reads nothing.
func NewScrubber(current func() *Store, o ScrubOptions) *Scrubber {
	if o.Period <= 0 {
		o.Period = DefaultScrubPeriod
	}
	if o.MinRate <= 0 {
		o.MinRate = scrubMinRate
	}
	if o.MaxRate <= 0 {
		o.MaxRate = scrubMaxRate
	}
	if o.OnFailure == nil {
		o.OnFailure = func(string, error) {}
	}
	return &Scrubber{current: current, opts: o,
		bytesDesc: prometheus.NewDesc("idemnode_store_scrub_bytes_total",
			"Bytes of the store's tables the background scrub read and checked.", nil, nil),
		passesDesc: prometheus.NewDesc("idemnode_store_scrub_passes_total",
			"Full passes of the background scrub over the store's tables.", nil, nil),
		failuresDesc: prometheus.NewDesc("idemnode_store_scrub_failures_total",
			"Tables the background scrub found with a block whose checksum fails, or could not read: this node's copy of the state is damaged.", nil, nil),
		lastPassDesc: prometheus.NewDesc("idemnode_store_scrub_last_pass_timestamp_seconds",
			"When the background scrub last finished a full pass (Unix seconds; 0 before the first).", nil, nil),
	}
}

// Run scrubs pass after pass, one starting every period, until ctx ends.
func (sc *Scrubber) Run(ctx context.Context) {
	for {
		start := time.Now()
		if err := sc.Pass(ctx); err != nil {
			return
		}
		if !waitUntil(ctx, start.Add(sc.opts.Period)) {
			return
		}
	}
}

// Pass reads every live table once. It returns only ctx's error: a table
// that fails is counted and reported through OnFailure.
func (sc *Scrubber) Pass(ctx context.Context) error {
	s := sc.current()
	if s == nil {
		return ctx.Err()
	}
	tables, total, err := s.liveTables()
	if err != nil {
		return ctx.Err() // closed or replaced meanwhile: the next pass reads the new one
	}
	p := &pacer{rate: sc.rate(total), start: time.Now()}
	for _, path := range tables {
		err := scrubTable(ctx, s.opts.FS, path, p, &sc.bytes)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			sc.failures.Add(1)
			sc.opts.OnFailure(path, err)
		}
	}
	sc.passes.Add(1)
	sc.lastPass.Store(time.Now().Unix())
	return nil
}

// rate spreads total bytes over the period, within the bounds.
func (sc *Scrubber) rate(total int64) int64 {
	r := int64(float64(total) / sc.opts.Period.Seconds())
	return min(max(r, sc.opts.MinRate), sc.opts.MaxRate)
}

// liveTables lists the files of the store's live tables and their total
// size.
func (s *Store) liveTables() ([]string, int64, error) {
	if !s.acquire() {
		return nil, 0, errors.New("store closed")
	}
	defer s.release()
	levels, err := s.db.SSTables()
	if err != nil {
		return nil, 0, fmt.Errorf("list the store's tables: %w", err)
	}
	dir := s.opts.FS.PathJoin(s.root, s.name)
	seen := map[string]bool{}
	var paths []string
	var total int64
	for _, level := range levels {
		for _, t := range level {
			// Virtual tables share a backing file: read it once.
			path := s.opts.FS.PathJoin(dir, fmt.Sprintf("%s.sst", t.BackingSSTNum))
			if seen[path] {
				continue
			}
			seen[path] = true
			paths = append(paths, path)
			total += int64(t.Size)
		}
	}
	return paths, total, nil
}

// scrubTable checks the checksum of every block of the table at path,
// reading at the pacer's rate, and adds what it read to counted. A table
// compacted away since it was listed is skipped.
func scrubTable(ctx context.Context, fs vfs.FS, path string, p *pacer, counted *atomic.Int64) error {
	f, err := fs.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	pf := &pacedFile{File: f, ctx: ctx, pacer: p, counted: counted}
	readable, err := sstable.NewSimpleReadable(pf)
	if err != nil {
		f.Close()
		return fmt.Errorf("stat %s: %w", path, err)
	}
	// No cache in the options: the blocks read here bypass the block cache.
	r, err := sstable.NewReader(ctx, readable, sstable.ReaderOptions{})
	if err != nil {
		readable.Close()
		return fmt.Errorf("open table %s: %w", path, err)
	}
	err = r.ValidateBlockChecksums()
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("check table %s: %w", path, err)
	}
	return nil
}

// pacedFile reads a table at the pacer's rate and stops when ctx ends.
type pacedFile struct {
	vfs.File
	ctx     context.Context
	pacer   *pacer
	counted *atomic.Int64
}

func (f *pacedFile) ReadAt(b []byte, off int64) (int, error) {
	if err := f.pacer.wait(f.ctx, len(b)); err != nil {
		return 0, err
	}
	n, err := f.File.ReadAt(b, off)
	f.counted.Add(int64(n))
	return n, err
}

// pacer holds reads to rate bytes per second since start.
type pacer struct {
	rate  int64
	start time.Time
	sent  int64
}

// wait returns when n more bytes keep within the rate, or ctx's error.
func (p *pacer) wait(ctx context.Context, n int) error {
	p.sent += int64(n)
	due := p.start.Add(time.Duration(float64(p.sent) / float64(p.rate) * float64(time.Second)))
	if !waitUntil(ctx, due) {
		return ctx.Err()
	}
	return nil
}

// waitUntil waits until t and reports whether ctx was still live then.
func waitUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Describe sends the scrub's metric descriptions.
func (sc *Scrubber) Describe(ch chan<- *prometheus.Desc) {
	ch <- sc.bytesDesc
	ch <- sc.passesDesc
	ch <- sc.failuresDesc
	ch <- sc.lastPassDesc
}

// Collect sends the scrub's progress.
func (sc *Scrubber) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(sc.bytesDesc, prometheus.CounterValue, float64(sc.bytes.Load()))
	ch <- prometheus.MustNewConstMetric(sc.passesDesc, prometheus.CounterValue, float64(sc.passes.Load()))
	ch <- prometheus.MustNewConstMetric(sc.failuresDesc, prometheus.CounterValue, float64(sc.failures.Load()))
	ch <- prometheus.MustNewConstMetric(sc.lastPassDesc, prometheus.GaugeValue, float64(sc.lastPass.Load()))
}
