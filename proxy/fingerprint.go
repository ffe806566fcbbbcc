package proxy

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"net/http"

	"github.com/idemnode/idemnode/idemhttp"
)

// fingerprintFunc is the route's fingerprint: a hash of the method, the
// path, the query (its parameters sorted), the body as the route says and
// the chosen headers, each part length-prefixed so that no two requests
// share an encoding. The query counts: POST /transfers?amount=100 and
// ?amount=999 under one key are two requests (422), not a replay.
func (f Fingerprint) fingerprintFunc() func(*http.Request, []byte) []byte {
	return func(r *http.Request, body []byte) []byte {
		h := sha256.New()
		part(h, []byte("idemnode-proxy/v1"))
		part(h, []byte(r.Method))
		part(h, []byte(r.URL.Path))
		part(h, []byte(r.URL.Query().Encode()))
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
