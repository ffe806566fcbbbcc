package proxy

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"net/http"

	"github.com/idemnode/idemnode/idemhttp"
)

// fingerprintFunc is the route's fingerprint: idemhttp's (method, path,
// canonical body) when the route asks for nothing else, so the proxy and
// the middleware agree on the same request; otherwise a hash of the
// method, the path, the body as the route says and the chosen headers,
// each part length-prefixed so that no two requests share an encoding.
func (f Fingerprint) fingerprintFunc() func(*http.Request, []byte) []byte {
	if f.Body == bodyCanonical && len(f.Headers) == 0 {
		return idemhttp.Fingerprint
	}
	return func(r *http.Request, body []byte) []byte {
		h := sha256.New()
		part(h, []byte("idemnode-proxy/v1"))
		part(h, []byte(r.Method))
		part(h, []byte(r.URL.Path))
		switch f.Body {
		case bodyCanonical:
			part(h, idemhttp.CanonicalBody(r.Header.Get("Content-Type"), body))
		case bodyBytes:
			part(h, body)
		default:
			part(h, nil)
		}
		for _, name := range f.Headers {
			vals := r.Header.Values(name)
			part(h, binary.AppendUvarint(nil, uint64(len(vals))))
			for _, v := range vals {
				part(h, []byte(v))
			}
		}
		return h.Sum(nil)
	}
}

func part(h hash.Hash, b []byte) {
	h.Write(binary.AppendUvarint(nil, uint64(len(b))))
	h.Write(b)
}
