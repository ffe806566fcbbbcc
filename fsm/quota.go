package fsm

import "fmt"

// Per-tenant quotas are decided here, in the state machine, so that every
// node agrees on every admission: a node-local counter would let a tenant
// store N on each node that happens to lead. The quota itself travels in the
// command — the proposing leader stamps its configured Quota into each Claim
// and Complete, as it stamps Now — so Apply stays a pure function of the
// state and the command, whatever each node's configuration says.

// Quota bounds what one tenant stores; a zero field is unlimited.
type Quota struct {
	// Keys bounds the tenant's stored records, PENDING and COMPLETED (an
	// expired record counts until an Expire entry deletes it).
	Keys uint64
	// Bytes bounds the tenant's stored bytes, as recordSize counts them.
	Bytes uint64
}

// QuotaKind says which quota a command would have exceeded.
type QuotaKind uint8

const (
	// QuotaNone: no quota was exceeded.
	QuotaNone QuotaKind = iota
	// QuotaKeys: the claim would store one record more than Quota.Keys.
	QuotaKeys
	// QuotaBytes: the claim or completion would store more than Quota.Bytes.
	QuotaBytes
)

// String returns "keys", "bytes" or "none".
func (k QuotaKind) String() string {
	switch k {
	case QuotaKeys:
		return "keys"
	case QuotaBytes:
		return "bytes"
	}
	return "none"
}

// Usage is what one tenant stores now.
type Usage struct {
	Keys  uint64
	Bytes uint64
}

// recordSize is what a record costs its tenant: every variable-length byte
// it stores — tenant, scope, key, fingerprint, owner and, once completed,
// the response's body and header names and values, and a recovery point's
// name and data. Fixed-size fields
// (times, token, status) are left out: they cost the same for every record,
// which the key quota already bounds.
func recordSize(r *Record) uint64 {
	n := len(r.Tenant) + len(r.Scope) + len(r.Key) + len(r.Fingerprint) + len(r.Owner)
	if r.Response != nil {
		n += len(r.Response.Body)
		for _, h := range r.Response.Headers {
			n += len(h.Name) + len(h.Value)
		}
	}
	if r.Checkpoint != nil {
		n += len(r.Checkpoint.Point) + len(r.Checkpoint.Data)
	}
	return uint64(n)
}

// cost is what r counts toward its tenant's usage: a key, unless it is a
// tombstone, and its bytes.
func cost(r *Record) Usage {
	u := Usage{Keys: 1, Bytes: recordSize(r)}
	if r.Tombstone {
		u.Keys = 0
	}
	return u
}

// admit reports which quota storing next would exceed, given what is stored
// under its key now (an expired record the claim replaces, or the PENDING
// record a completion fills in). Only growth is refused: a command that
// stores no more keys or bytes than before always passes, so a tenant over
// a quota lowered since can still complete and release what it holds.
func (t *tx) admit(q Quota, next *Record) QuotaKind {
	if q == (Quota{}) {
		return QuotaNone
	}
	use := t.usageOf(next.Tenant)
	keys, bytes := use.Keys+1, use.Bytes+recordSize(next)
	if old, ok := t.get(next.RecordKey); ok {
		bytes -= recordSize(old)
		if !old.Tombstone {
			keys = use.Keys
		}
	}
	switch {
	case q.Keys > 0 && keys > use.Keys && keys > q.Keys:
		return QuotaKeys
	case q.Bytes > 0 && bytes > use.Bytes && bytes > q.Bytes:
		return QuotaBytes
	}
	return QuotaNone
}

// Usage returns what tenant stores as of the last applied command.
func (m *Machine) Usage(tenant string) Usage {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.usage[tenant]
}

// EachUsage calls fn with every tenant that stores something, as of the
// last applied command, holding the machine's read lock: fn must be quick
// and must not call back into the machine.
func (m *Machine) EachUsage(fn func(tenant string, u Usage)) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for tenant, u := range m.usage {
		if u.Keys > 0 || u.Bytes > 0 {
			fn(tenant, u)
		}
	}
}

// quotaFlag is set in the type byte of an encoded Claim, Complete or Checkpoint that
// carries a Quota, which then follows the command's other fields. A command
// without a quota encodes exactly as before quotas existed, so old log
// entries decode unchanged and a cluster with quotas off writes the same
// bytes as one that predates them.
const quotaFlag byte = 0x80

func carriesQuota(c *Command) bool {
	return growsRecords(c.Type) && c.Quota != (Quota{})
}

// growsRecords reports whether commands of type t may store more than
// their record held: those carry the tenant's quota.
func growsRecords(t CommandType) bool {
	return t == TypeClaim || t == TypeComplete || t == TypeCheckpoint
}

// typeByte is the encoded type of c, flagged when a quota or a tombstone
// time follows.
func typeByte(c *Command) byte {
	b := byte(c.Type)
	if carriesQuota(c) {
		b |= quotaFlag
	}
	if carriesTombstone(c) {
		b |= tombstoneFlag
	}
	if watchesAbandon(c) {
		b |= watchFlag
	}
	return b
}

func (e *encoder) quota(c *Command) {
	if carriesQuota(c) {
		e.uvarint(c.Quota.Keys)
		e.uvarint(c.Quota.Bytes)
	}
}

// quota reads the quota of a flagged command. A flag on another type, or a
// flagged zero quota (which no encoder writes), is malformed.
func (d *decoder) quota(c *Command, flagged bool) {
	if !flagged {
		return
	}
	if !growsRecords(c.Type) {
		d.fail(fmt.Errorf("%w: quota on a %s command", ErrMalformed, c.Type))
		return
	}
	c.Quota = Quota{Keys: d.uvarint(), Bytes: d.uvarint()}
	if d.err == nil && c.Quota == (Quota{}) {
		d.fail(fmt.Errorf("%w: flagged empty quota", ErrMalformed))
	}
}
