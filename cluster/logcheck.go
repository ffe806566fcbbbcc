package cluster

import (
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/idemnode/idemnode/fsm"
)

// rejoinHint is what every corruption error tells the operator to do.
const rejoinHint = "restore this node from its peers: wipe the data dir and rejoin"

// verifyLog reads back every entry of the log store before raft starts and
// refuses a log that does not read as written. raft-wal checks its batch
// checksums only when it recovers the tail of the open segment, not on
// reads; commands carry a CRC-32C of their own (fsm's format 2), so a
// flipped byte inside one is found here rather than applied as another
// valid command. Raft's own fields are checked for what can be checked: the
// entry is present, holds the index it is stored under, and terms never
// decrease. Entries below the newest snapshot are checked too, since a
// leader still sends them to lagging followers.
func verifyLog(logs raft.LogStore) error {
	first, last, err := logBounds(logs)
	if err != nil || last == 0 {
		return err
	}
	var prevTerm uint64
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := readLog(logs, i, &l); err != nil {
			return corruptEntry(i, err)
		}
		if err := checkEntry(i, prevTerm, &l); err != nil {
			return corruptEntry(i, err)
		}
		prevTerm = l.Term
	}
	return nil
}

// logBounds returns the first and last index of the log (0, 0 when empty).
func logBounds(logs raft.LogStore) (first, last uint64, err error) {
	if first, err = logs.FirstIndex(); err != nil {
		return 0, 0, fmt.Errorf("read first log index: %w", err)
	}
	if last, err = logs.LastIndex(); err != nil {
		return 0, 0, fmt.Errorf("read last log index: %w", err)
	}
	return first, last, nil
}

// readLog reads one entry; a log store may panic on damaged bytes (a
// length that runs past its segment, bbolt's pages in a data dir not yet
// migrated), and that is corruption to report, not a crash.
func readLog(logs raft.LogStore, i uint64, l *raft.Log) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("reading it panicked: %v", p)
		}
	}()
	return logs.GetLog(i, l)
}

func checkEntry(i, prevTerm uint64, l *raft.Log) error {
	switch {
	case l.Index != i:
		return fmt.Errorf("stored under index %d but holds index %d", i, l.Index)
	case l.Term < prevTerm:
		return fmt.Errorf("term %d after term %d", l.Term, prevTerm)
	case l.Type == raft.LogCommand:
		_, err := fsm.DecodeCommand(l.Data)
		return err
	}
	return nil
}

func corruptEntry(i uint64, err error) error {
	return fmt.Errorf("log entry %d is %w: %w; %s", i, ErrCorrupt, err, rejoinHint)
}
