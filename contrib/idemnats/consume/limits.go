package consume

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/idemnode/idemnode/client"
)

// The server's default limits on what Process sends (docs/API.md, "Data
// model"). A server started with other limits refuses by its own; Process
// ends such a message (Term) on the claim's InvalidArgument.
const (
	maxKey    = 255
	maxScope  = 256
	maxTenant = 128
	// maxStoredBody is the server's default MaxBody (1 MiB).
	maxStoredBody = 1 << 20
	// defaultMaxResult is Config.MaxResult's default.
	defaultMaxResult = 64 << 10
)

// ErrInvalidKey means a message's key is one idemnode refuses: Process ends
// the message (Term) without running the handler. Hashed derives a valid key
// from any text.
var ErrInvalidKey = errors.New("idempotency key not accepted by idemnode (1-255 bytes of printable ASCII)")

// CheckKey reports whether idemnode accepts key under its default limits:
// 1 to 255 bytes of printable ASCII (space to ~).
func CheckKey(key string) error {
	if len(key) == 0 || len(key) > maxKey {
		return fmt.Errorf("key of %d bytes: %w", len(key), ErrInvalidKey)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < ' ' || c > '~' {
			return fmt.Errorf("key %q: byte %d is 0x%02x: %w", key, i, c, ErrInvalidKey)
		}
	}
	return nil
}

// Hashed wraps f so that every key it returns is replaced by
// client.DeriveKey(namespace, key): a UUID that idemnode accepts whatever
// the original key holds (non-ASCII event ids, ids longer than 255 bytes).
// Two messages share a derived key only when they share the original key.
func Hashed(namespace string, f KeyFunc) KeyFunc {
	return func(m Message) (string, error) {
		k, err := f(m)
		if err != nil {
			return "", err
		}
		return client.DeriveKey(namespace, k), nil
	}
}

// checkID refuses a tenant or scope the server's default limits refuse, so
// New fails instead of every message.
func checkID(tenant, scope string) error {
	if len(tenant) > maxTenant {
		return fmt.Errorf("consume: Config.Tenant is %d bytes, idemnode takes at most %d", len(tenant), maxTenant)
	}
	for i := 0; i < len(tenant); i++ {
		if c := tenant[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("consume: Config.Tenant %q: byte %d is 0x%02x; idemnode takes printable ASCII without spaces", tenant, i, c)
		}
	}
	if len(scope) > maxScope {
		return fmt.Errorf("consume: Config.Scope is %d bytes, idemnode takes at most %d", len(scope), maxScope)
	}
	if !utf8.ValidString(scope) {
		return fmt.Errorf("consume: Config.Scope %q is not valid UTF-8", scope)
	}
	for i, r := range scope {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("consume: Config.Scope %q: byte %d is not printable UTF-8", scope, i)
		}
	}
	return nil
}

// bounded returns body, or when it is longer than max a digest of it
// ("sha256:<hex> <n> bytes"), so that recording it is not refused for its
// size.
func bounded(body []byte, max int) []byte {
	if len(body) <= max {
		return body
	}
	return fmt.Appendf(nil, "sha256:%x %d bytes", sha256.Sum256(body), len(body))
}
