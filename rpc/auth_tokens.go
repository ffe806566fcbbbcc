package rpc

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
)

// TokenTable maps bearer tokens to identities. It keeps only the SHA-256 of
// each token, read from a file of lines
//
//	<sha256-hex-of-token> <tenant> [admin]
//
// (blank lines and lines starting with # are ignored), so the file, a
// backup of it or a heap dump never holds a usable token. Reload swaps the
// whole table atomically: a call sees the old table or the new one, never
// a mix, and a file that fails to parse leaves the old table in place.
type TokenTable struct {
	path      string
	maxTenant int
	cur       atomic.Pointer[tokenSet]
}

// tokenSet is one parsed file; it is never modified after parsing.
type tokenSet map[[sha256.Size]byte]tokenEntry

type tokenEntry struct {
	hash   [sha256.Size]byte
	tenant string
	admin  bool
}

// LoadTokenTable reads the tokens file at path; tenants longer than
// maxTenant bytes are refused.
func LoadTokenTable(path string, maxTenant int) (*TokenTable, error) {
	t := &TokenTable{path: path, maxTenant: maxTenant}
	if _, err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Reload reads the file again and swaps the table in; it returns the number
// of tokens. On error the table in use stays as it was.
func (t *TokenTable) Reload() (int, error) {
	f, err := os.Open(t.path)
	if err != nil {
		return 0, fmt.Errorf("open tokens file: %w", err)
	}
	defer f.Close()
	set, err := parseTokens(f, t.maxTenant)
	if err != nil {
		return 0, fmt.Errorf("tokens file %s: %w", t.path, err)
	}
	t.cur.Store(&set)
	return len(set), nil
}

// Len returns the number of tokens in the table in use.
func (t *TokenTable) Len() int { return len(*t.cur.Load()) }

// lookup returns the identity of token. The token is hashed before any
// comparison, so no comparison ever runs over the secret itself: a map
// lookup's timing depends only on the SHA-256 of a guess, which tells an
// attacker nothing about any stored token's preimage. The final check of
// the full hash is constant-time as well.
func (t *TokenTable) lookup(token string) (Identity, bool) {
	sum := sha256.Sum256([]byte(token))
	e, ok := (*t.cur.Load())[sum]
	if !ok || subtle.ConstantTimeCompare(e.hash[:], sum[:]) != 1 {
		return Identity{}, false
	}
	return Identity{Tenant: e.tenant, Admin: e.admin, Via: "token"}, true
}

// HashToken returns the hex SHA-256 of token, the form the tokens file holds.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func parseTokens(r io.Reader, maxTenant int) (tokenSet, error) {
	set := tokenSet{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		e, err := parseTokenLine(text, maxTenant)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if _, dup := set[e.hash]; dup {
			return nil, fmt.Errorf("line %d: the same token hash appears twice", line)
		}
		set[e.hash] = e
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return set, nil
}

func parseTokenLine(text string, maxTenant int) (tokenEntry, error) {
	f := strings.Fields(text)
	if len(f) < 2 || len(f) > 3 || (len(f) == 3 && f[2] != "admin") {
		return tokenEntry{}, fmt.Errorf("want '<sha256-hex> <tenant> [admin]', got %d fields", len(f))
	}
	var e tokenEntry
	// The length first: hex.Decode must not write past the hash.
	if len(f[0]) != hex.EncodedLen(sha256.Size) {
		return tokenEntry{}, fmt.Errorf("the hash must be 64 hex digits (idemnode auth hash-token prints it)")
	}
	if _, err := hex.Decode(e.hash[:], []byte(f[0])); err != nil {
		return tokenEntry{}, fmt.Errorf("the hash must be 64 hex digits (idemnode auth hash-token prints it)")
	}
	if err := CheckTenantName(f[1], maxTenant); err != nil {
		return tokenEntry{}, err
	}
	e.tenant, e.admin = f[1], len(f) == 3
	return e, nil
}

// CheckTenantName validates a tenant that credentials name: what a request
// may name (docs/API.md: 1-maxTenant bytes of printable ASCII without
// spaces), never empty (an empty tenant field in a request means "mine"),
// so it reads the same in a tokens file, a certificate and a log line.
func CheckTenantName(tenant string, maxTenant int) error {
	return checkASCII("tenant", tenant, 1, maxTenant, '!', ruleTenant)
}
