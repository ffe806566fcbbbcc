package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
)

// maxTenant is the service's limit on a tenant: 1-128 bytes of printable
// ASCII without spaces.
const maxTenant = 128

// tenantFunc returns how the proxy names a request's tenant.
func (t Tenant) tenantFunc() func(*http.Request) (string, error) {
	switch {
	case t.Header != "":
		return func(r *http.Request) (string, error) {
			vals := r.Header.Values(t.Header)
			if len(vals) != 1 {
				return "", fmt.Errorf("the %s header must be sent once (sent %d times)", t.Header, len(vals))
			}
			if !validTenant(vals[0]) {
				return "", fmt.Errorf("%s: want 1-%d bytes of printable ASCII without spaces", t.Header, maxTenant)
			}
			return vals[0], nil
		}
	case t.AuthorizationHash:
		return func(r *http.Request) (string, error) {
			auth := r.Header.Values("Authorization")
			if len(auth) != 1 || auth[0] == "" {
				return "", errors.New("the Authorization header must be sent once: it names the tenant")
			}
			sum := sha256.Sum256([]byte(auth[0]))
			return "authz-" + hex.EncodeToString(sum[:16]), nil
		}
	}
	return func(*http.Request) (string, error) { return "", nil }
}

func validTenant(s string) bool {
	if len(s) == 0 || len(s) > maxTenant {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
