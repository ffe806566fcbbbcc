package store

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// migrate rewrites old, a store of an earlier format (version) in the
// dir name, into the next dir in this release's format and makes that one
// current. It closes old and returns the new dir's name and database. It
// copies keys, not records: in format 1 each record under its key becomes
// the key's position and the record at that position, numbered in key
// order; in both, the expiry index moves from 'x' to its place below the
// records (keys.go); everything else is kept as it is (the records at
// their positions, the feed, the usage, the metadata). The tables are
// written sorted and ingested, as a restore's are (one pass over the
// store, and as much disk again until the old dir is removed). A crash
// before CURRENT names the new dir leaves the old store current, and the
// next Open removes the new dir and migrates again.
func migrate(o Options, root, name string, old *pebble.DB, version uint64, cache *pebble.Cache, brk *breaker) (string, *pebble.DB, error) {
	next := nextName(name)
	dir := o.FS.PathJoin(root, next)
	fail := func(err error) (string, *pebble.DB, error) {
		old.Close()
		o.FS.RemoveAll(dir)
		return "", nil, fmt.Errorf("migrate the store from format %d to %d: %w", version, FormatVersion, err)
	}
	if err := o.FS.RemoveAll(dir); err != nil {
		return fail(err)
	}
	if err := roomToMigrate(o.FS, root, old); err != nil {
		return fail(err)
	}
	po := o.pebbleOptions(cache, brk)
	db, err := openNewDB(dir, po)
	if err != nil {
		return fail(err)
	}
	files := tableFiles{fs: o.FS, root: root, name: next, db: db, po: po}
	last, err := copyPlaced(old, version, &files)
	if err == nil {
		err = db.Set(positionKey, encodePosition(last), pebble.NoSync)
	}
	if err == nil {
		err = flush(db, brk)
	}
	if err == nil {
		err = writeCurrent(o.FS, root, next)
	}
	// A failure after CURRENT was renamed (syncing the dir) leaves the
	// new store current: it is the store now, and removing it would leave
	// CURRENT naming nothing, and the next Open would reap the old one.
	// Where CURRENT cannot be read, both dirs stay: the next Open keeps
	// the one it names.
	if err != nil {
		files.remove()
		switch cur, rerr := readCurrent(o.FS, root); {
		case rerr != nil:
			db.Close()
			old.Close()
			return "", nil, fmt.Errorf("migrate the store from format %d to %d: %w", version, FormatVersion, errors.Join(err, rerr))
		case cur != next:
			db.Close()
			return fail(err)
		}
	}
	old.Close()
	// The old dir goes now, or at the next Open (reapExcept): a failure
	// to remove it does not undo the migration.
	o.FS.RemoveAll(o.FS.PathJoin(root, name))
	return next, db, nil
}

// roomToMigrate refuses a migration the volume has no room for: it writes
// a copy of the store's live tables beside them, and removes the old ones
// only after. Without the check the disk would fill part way through, the
// node would stop, and the next start would fill it again.
func roomToMigrate(fs vfs.FS, root string, old *pebble.DB) error {
	du, err := fs.GetDiskUsage(root)
	if errors.Is(err, vfs.ErrUnsupported) {
		return nil // a file system in memory, in tests
	}
	if err != nil {
		return fmt.Errorf("read the free space of %s: %w", root, err)
	}
	if need := uint64(old.Metrics().Total().TablesSize); du.AvailBytes < need {
		return fmt.Errorf("not enough free space in %s: the copy of the store it writes needs %s, and %s is free; "+
			"free some space or grow the volume, then start again", root, readableBytes(need), readableBytes(du.AvailBytes))
	}
	return nil
}

// readableBytes writes n bytes for a person to read.
func readableBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}

// copyPlaced writes old's keys, of format version, into files as this
// release lays them out and ingests them; it returns the last position
// given. The three runs hold disjoint, ascending ranges: the expiry index,
// the keys below the records' positions (feed, metadata, record keys,
// usage), the records.
func copyPlaced(old *pebble.DB, version uint64, files *tableFiles) (uint64, error) {
	it, err := old.NewIter(nil)
	if err != nil {
		return 0, err
	}
	var expiry, low, records tableRun
	var last uint64
	for it.First(); it.Valid() && err == nil; it.Next() {
		k, v := it.Key(), it.Value()
		switch {
		case k[0] == prefixFormat: // the new store has its own
		case k[0] == prefixRecord && version == formatRecordsByKey:
			last++
			err = files.set(&low, k, encodePosition(last))
			if err == nil {
				err = files.set(&records, valueKey(last), v)
			}
		case k[0] == prefixLast && version == formatExpiryLast:
			last, err = decodePosition(v) // written once the tables are in
		case k[0] == prefixValue && version == formatExpiryLast:
			err = files.set(&records, k, v)
		case k[0] == prefixRecord, k[0] == prefixEvent, k[0] == prefixMeta, k[0] == prefixUsage:
			err = files.set(&low, k, v)
		case k[0] == prefixExpiryBefore3:
			err = files.set(&expiry, append([]byte{prefixExpiry}, k[1:]...), v)
		default:
			err = fmt.Errorf("%w: a key %q of no kind format %d has", ErrCorrupt, k, version)
		}
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = files.ingest(&expiry, &low, &records)
	}
	if err != nil {
		expiry.close()
		low.close()
		records.close()
		return 0, err
	}
	return last, nil
}
