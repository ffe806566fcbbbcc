package client

import (
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// uuid is an RFC 9562 UUID.
type uuid [16]byte

func (u uuid) String() string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// setVersion stamps the version nibble and the RFC variant bits.
func (u *uuid) setVersion(v byte) {
	u[6] = u[6]&0x0f | v<<4
	u[8] = u[8]&0x3f | 0x80
}

// uuidV5 is the name-based UUID of name in namespace (RFC 9562 §5.5).
func uuidV5(namespace uuid, name []byte) uuid {
	h := sha1.New()
	h.Write(namespace[:])
	h.Write(name)
	var u uuid
	copy(u[:], h.Sum(nil))
	u.setVersion(5)
	return u
}

// namespaceURL is RFC 9562's namespace for URLs.
var namespaceURL = uuid{0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}

// keyNamespace is the namespace of derived keys: the version 5 UUID of
// the URL https://idemnode.io/keys.
var keyNamespace = uuidV5(namespaceURL, []byte("https://idemnode.io/keys"))

// NewKey returns a new random idempotency key: a UUID version 4 in its
// canonical form, such as "1b4e28ba-2fa1-4d2e-883f-0016d3cca427".
// Generate it once per logical operation, store it with the operation, and
// send the same key on every retry (see the package documentation).
func NewKey() string {
	var u uuid
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails (Go 1.24+)
	u.setVersion(4)
	return u.String()
}

// DeriveKey returns the idempotency key of a business operation: a UUID
// version 5 computed from namespace and parts, the same on every machine
// and every retry. namespace names the kind of operation ("payments/charge");
// parts are the stable identifiers of this one, such as tenant, order id
// and intent version. Each part is length-prefixed before hashing, so
// ("ab", "c") and ("a", "bc") give different keys.
//
// Use DeriveKey when the caller keeps no state between attempts (a message
// consumer, a cron job); otherwise prefer NewKey generated when the
// operation is created. A derived key makes two deliberate, identical
// operations one: include an identifier that tells them apart.
func DeriveKey(namespace string, parts ...string) string {
	name := appendPart(nil, namespace)
	for _, p := range parts {
		name = appendPart(name, p)
	}
	return uuidV5(keyNamespace, name).String()
}

// appendPart appends p prefixed by its length as a uvarint, so that a
// sequence of parts reads back one way only.
func appendPart(b []byte, p string) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// Fingerprint returns the fingerprint of a request for callers outside
// HTTP (idemhttp fingerprints HTTP requests itself): the SHA-256 of the
// parts, each prefixed by its length as a uvarint (encoding/binary), so
// ("ab", "c"), ("a", "bc") and ("a", "b", "c") all differ, and so do no
// parts and one empty part. Pass what identifies the request, in a fixed
// order: the operation's name and its arguments in a canonical encoding
// (not a Go map's iteration order, not a timestamp of the attempt). The
// encoding is fixed: a change would make every retry of a request in
// flight a MISMATCH.
func Fingerprint(parts ...[]byte) []byte {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, p := range parts {
		h.Write(binary.AppendUvarint(n[:0], uint64(len(p)))) // the encoding of appendPart
		h.Write(p)
	}
	return h.Sum(nil)
}
