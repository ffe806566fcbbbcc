// Package fsm is idemnode's replicated state machine: it decides every
// command (claim, complete, release, expire, the recovery points and the
// abandoned feed) from the state, the command's bytes and its log index
// alone, so every node that applies the same log holds the same records
// and the same digest. Time comes in the commands (the proposer stamps it),
// never from the clock.
//
// Records live behind the Store interface: store.Pebble on disk in
// production, NewMemStore as the in-memory reference model the tests and
// the store's differential test compare against. The package imports
// nothing of the project. DESIGN.md gives the reasons: FSM time, outcomes,
// quotas, fencing tokens, snapshots, the command encoding and its checksum.
package fsm
