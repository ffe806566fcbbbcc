package fsm

// CommandType selects the handler of a command. The zero value is invalid so
// that a zeroed or truncated entry never decodes into a real command.
type CommandType uint8

const (
	// TypeUnknown is never valid.
	TypeUnknown CommandType = iota
	// TypeClaim claims a key (Key, Fingerprint, Owner, Lease, TTL).
	TypeClaim
	// TypeComplete stores the response of the holder of Token.
	TypeComplete
	// TypeRelease deletes a PENDING record held by Token.
	TypeRelease
	// TypeExtend pushes the lease of the holder of Token.
	TypeExtend
	// TypeExpire deletes at most Limit records whose TTL has passed.
	TypeExpire
	// TypeBatch applies Batch in order, as if each were its own entry.
	TypeBatch
	// TypeCheckpoint stores the recovery point of the holder of Token.
	TypeCheckpoint
	// TypeIdentify gives the cluster its identity (Cluster), once: the
	// first one applied sets it and every later one leaves it (meta.go).
	TypeIdentify
	typeEnd
)

// Command levels: which commands a release applies. Every release with
// the on-disk store applies level 1: Claim to Batch, with quotas. Level 2
// adds Checkpoint and tombstone times; level 3 claims that watch for
// abandonment (and the feed of abandoned claims they make); level 4 the
// cluster's identity (Identify), which only a release that checks it on
// every Raft connection applies. A node that meets a command it
// cannot decode stops rather than diverge, so a leader proposes a command
// above BaseLevel only once every voter runs a release that applies it
// (cluster.Node.Apply).
const (
	BaseLevel = 1
	LastLevel = 4
)

// LevelOf is the level a node must apply to decode c.
func LevelOf(c *Command) int {
	level := BaseLevel
	switch {
	case c.Type == TypeIdentify:
		level = 4
	case watchesAbandon(c):
		level = 3
	case c.Type == TypeCheckpoint || carriesTombstone(c):
		level = 2
	}
	for _, sub := range c.Batch {
		level = max(level, LevelOf(sub))
	}
	return level
}

// watchesAbandon reports whether c is a claim that watches for abandonment;
// the flag means nothing on another command and is not encoded there.
func watchesAbandon(c *Command) bool { return c.Type == TypeClaim && c.WatchAbandon }

var typeNames = [...]string{"unknown", "claim", "complete", "release", "extend", "expire", "batch", "checkpoint", "identify"}

// String returns the lower-case name of the command type.
func (t CommandType) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "unknown"
}

// Command is one state-machine command. Which fields matter depends on Type;
// the rest stay zero. The proposing leader stamps Now (its wall clock, Unix
// nanoseconds); the state machine never reads a clock of its own.
type Command struct {
	Type CommandType
	Now  int64

	Key         RecordKey   // claim, complete, release, extend, checkpoint
	Fingerprint []byte      // claim
	Owner       string      // claim
	Lease       int64       // claim, extend: nanoseconds
	TTL         int64       // claim: nanoseconds
	Token       uint64      // complete, release, extend, checkpoint
	Response    *Response   // complete
	Checkpoint  *Checkpoint // checkpoint
	Limit       uint32      // expire
	Batch       []*Command
	// Quota is the tenant's quota the proposing leader stamped (claim,
	// complete, checkpoint); zero is unlimited. See quota.go.
	Quota Quota
	// Tombstone is how long the record stays a tombstone after its TTL
	// (claim, complete; nanoseconds, 0: none), as the proposing leader's
	// --tombstone-ttl says: stamped like Quota, so nodes configured
	// differently never diverge.
	Tombstone int64
	// WatchAbandon asks that the claimed record be reported abandoned if
	// its lease lapses while it is PENDING (claim; abandon.go). The leader
	// sets it once every voter applies level 3.
	WatchAbandon bool
	// Cluster is the identity an Identify command gives the cluster: the
	// proposing leader draws it at random, so the state machine stays a
	// pure function of the log.
	Cluster []byte
}
