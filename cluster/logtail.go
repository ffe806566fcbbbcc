package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// A damaged last batch of the log.
//
// raft-wal checks the checksum of the last batch of the tail segment at
// open and, when it fails, drops the batch as a torn write: a write that a
// crash cut short was never acknowledged, so nothing is lost. A batch that
// was written whole and later damaged on disk (a flipped bit) fails the
// same check and is dropped the same way, and that batch was acknowledged.
// What the node may do then depends on the store:
//
//   - the store has applied every entry of the batch: nothing is lost. But
//     the store, which is raft's snapshot (snapstore.go), now stands past
//     the log's end, and raft appends after the snapshot while the log
//     refuses a gap: every start ended in "non-monotonic log entries". The
//     log is emptied, as an installed snapshot empties a log that ends
//     before it (install.go): raft starts from the store and takes later
//     entries from its peers (a single node appends after the store).
//   - the store has not applied all of them: those entries are gone from
//     this node, and it may have acknowledged them to a leader (or, alone,
//     to clients). It refuses to start and names them.
//
// The batch is told from a torn write by being whole: every frame up to
// its commit frame parses, and only the checksum fails. A torn write leaves
// no commit frame after the entries (or zeros among them).

// tailDamage is the range of log entries in a last batch that was written
// whole and fails its checksum; zero when there is none.
type tailDamage struct{ first, last uint64 }

func (d tailDamage) found() bool { return d.last > 0 }

// raft-wal's segment format (segment/format.go): a 32-byte file header,
// then frames with an 8-byte header (type, 3 reserved, little-endian
// length, or the CRC-32C for a commit frame), payloads padded to 8 bytes.
const (
	walFileHeaderLen  = 32
	walFrameHeaderLen = 8
	walFrameEntry     = 1
	walFrameIndex     = 2
	walFrameCommit    = 3
)

// scanLogTail reads the tail segment of the log in dir, before raft-wal
// opens it, and reports a damaged last batch.
func scanLogTail(dir string) (tailDamage, error) {
	if _, err := os.Stat(filepath.Join(dir, metadb.FileName)); errors.Is(err, os.ErrNotExist) {
		return tailDamage{}, nil
	}
	var meta metadb.BoltMetaDB
	state, err := meta.Load(dir)
	meta.Close()
	if err != nil {
		return tailDamage{}, fmt.Errorf("read the log's segment list in %s: %w", dir, err)
	}
	for _, info := range state.Segments {
		if info.SealTime.IsZero() {
			return scanSegment(filepath.Join(dir, segment.FileName(info)), info)
		}
	}
	return tailDamage{}, nil
}

// scanSegment walks the frames of a tail segment as raft-wal's recovery
// does and checks the last batch's checksum.
func scanSegment(path string, info types.SegmentInfo) (tailDamage, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return tailDamage{}, nil // created at the next append
	}
	if err != nil {
		return tailDamage{}, fmt.Errorf("read log segment: %w", err)
	}
	defer f.Close()
	type commit struct {
		offset  int64
		entries uint64
	}
	var prev, final *commit
	var entries uint64
	var hdr [walFrameHeaderLen]byte
	off := int64(walFileHeaderLen)
	for {
		if _, err := f.ReadAt(hdr[:], off); err != nil {
			break // the file's end
		}
		typ, n := hdr[0], binary.LittleEndian.Uint32(hdr[4:])
		if typ < walFrameEntry || typ > walFrameCommit || hdr[1]|hdr[2]|hdr[3] != 0 {
			break // zeros after the data, or a torn write
		}
		switch typ {
		case walFrameEntry:
			entries++
		case walFrameCommit:
			prev, final = final, &commit{offset: off, entries: entries}
			n = 0
		}
		off += walFrameHeaderLen + int64(n) + int64((8-n%8)%8)
	}
	if final == nil || final.entries < entries || final.entries == 0 {
		return tailDamage{}, nil // nothing committed, or entries after the last commit: a torn write
	}
	var start int64 // the first batch's checksum covers the file header
	var before uint64
	if prev != nil {
		start, before = prev.offset+walFrameHeaderLen, prev.entries
	}
	sum := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	if _, err := io.Copy(sum, io.NewSectionReader(f, start, final.offset-start)); err != nil {
		return tailDamage{}, fmt.Errorf("read log segment: %w", err)
	}
	if _, err := f.ReadAt(hdr[:], final.offset); err != nil {
		return tailDamage{}, fmt.Errorf("read log segment: %w", err)
	}
	if sum.Sum32() == binary.LittleEndian.Uint32(hdr[4:]) || before == final.entries {
		return tailDamage{}, nil
	}
	return tailDamage{first: info.BaseIndex + before, last: info.BaseIndex + final.entries - 1}, nil
}

// resolveLogTail, before raft starts, makes a log that ends before the
// store start from the store, or refuses a damaged last batch that the
// store does not hold (see above).
func resolveLogTail(logs raft.LogStore, d tailDamage, applied uint64, log *slog.Logger) error {
	if d.found() && d.last > applied {
		lost := max(d.first, applied+1)
		return fmt.Errorf("raft state is %w: log entries %d-%d, the log's last batch, fail their checksum (damaged on disk), "+
			"and the store holds entries up to %d only, so entries %d-%d are lost on this node and it may have acknowledged them; %s "+
			"(a single node has no peers to restore from: restore a backup with `idemnode snapshot restore`)",
			ErrCorrupt, d.first, d.last, applied, lost, d.last, rejoinHint)
	}
	if d.found() {
		log.Warn("the log's last batch fails its checksum (damaged on disk); the store holds those entries, so nothing is lost",
			"first", d.first, "last", d.last, "store_applied", applied)
	}
	first, last, err := logBounds(logs)
	if err != nil || last == 0 || last >= applied {
		return err
	}
	// Raft would append after the store while the log ends before it.
	log.Warn("the log ends before the store: emptying it so raft starts from the store and takes later entries from the leader",
		"log_first", first, "log_last", last, "store_applied", applied)
	if err := logs.DeleteRange(first, last); err != nil {
		return fmt.Errorf("empty the log that ends at entry %d, before the store's %d: %w", last, applied, err)
	}
	return nil
}
