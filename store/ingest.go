package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// tableFiles writes sorted tables beside a database being filled (a
// restore, a migration) and ingests them into it, which puts them in the
// bottom level at once. Each run of tables holds ascending keys, and the
// runs hold disjoint ranges of keys, so every table goes in as it is.
type tableFiles struct {
	fs    vfs.FS
	root  string // the fsm dir, where the tables are written
	name  string // the store dir they go into, which names them
	db    *pebble.DB
	po    *pebble.Options
	paths []string
	count int
}

// tableRun is a run of tables of ascending keys, table the one being
// written.
type tableRun struct {
	table *sstable.Writer
	size  int
}

const (
	tableBytes = 64 << 20
	// ingestPrefix names tables written for ingestion, in the fsm dir;
	// Open removes any a crash left behind.
	ingestPrefix = "ingest-"
)

// set adds a key to run's table, starting a new one when it is full.
func (t *tableFiles) set(run *tableRun, k, v []byte) error {
	if run.table == nil {
		t.count++
		path := t.fs.PathJoin(t.root, fmt.Sprintf("%s%s-%06d.sst", ingestPrefix, t.name, t.count))
		f, err := t.fs.Create(path, vfs.WriteCategoryUnspecified)
		if err != nil {
			return fmt.Errorf("create a table to ingest: %w", err)
		}
		run.table = sstable.NewWriter(objstorageprovider.NewFileWritable(f), t.po.MakeWriterOptions(len(t.po.Levels)-1, t.db.TableFormat()))
		t.paths, run.size = append(t.paths, path), 0
	}
	if err := run.table.Set(k, v); err != nil {
		return fmt.Errorf("write a table to ingest: %w", err)
	}
	if run.size += len(k) + len(v); run.size >= tableBytes {
		return run.close()
	}
	return nil
}

func (run *tableRun) close() error {
	if run.table == nil {
		return nil
	}
	err := run.table.Close()
	run.table = nil
	if err != nil {
		return fmt.Errorf("close a table to ingest: %w", err)
	}
	return nil
}

// ingest closes the runs and moves the tables written so far into the
// database.
func (t *tableFiles) ingest(runs ...*tableRun) error {
	var errs []error
	for _, run := range runs {
		errs = append(errs, run.close())
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if len(t.paths) == 0 {
		return nil
	}
	if err := t.db.Ingest(context.Background(), t.paths); err != nil {
		return fmt.Errorf("ingest tables: %w", err)
	}
	t.remove()
	return nil
}

// remove removes the table files (Ingest linked them into the database).
func (t *tableFiles) remove() {
	for _, p := range t.paths {
		t.fs.Remove(p)
	}
	t.paths = nil
}
