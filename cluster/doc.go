// Package cluster runs one node of the state machine under hashicorp/raft:
// the log in raft-wal, term and vote in raft-boltdb, the records in the
// state machine's Pebble store, which is also raft's snapshot store. It
// owns membership and failure detection (hashicorp/memberlist), bootstrap
// with --bootstrap-expect, the cluster identity that keeps a node of
// another cluster out, linearizable reads, leader-side expiry, backups and
// restores, and the checks that refuse a damaged log or store.
//
// Open(Config) starts a Node; it proposes commands (Apply), confirms
// leadership for reads (LinearizableBarrier), answers the admin calls
// (Members, RemoveMember, TransferLeadership, Backup) and reports a fatal
// fault on Fatal(). Package rpc maps the API onto it. DESIGN.md gives the
// reasons.
package cluster
