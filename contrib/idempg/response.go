package idempg

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/idemnode/idemnode/client"
)

// idemnode's limits on a response (rpc.DefaultLimits; the body's is
// Options.MaxBody). A response outside them would be committed in the row
// and then refused by Complete, so checkResponse refuses it before COMMIT.
const (
	maxStatus      = 999
	maxHeaders     = 64
	maxHeaderBytes = 16 << 10
	defaultMaxBody = 1 << 20
)

// checkResponse holds resp to what idemnode's Complete accepts
// (rpc/validate.go), and header text to valid UTF-8, which protobuf strings
// need and which the row's JSON would otherwise silently replace.
func checkResponse(resp client.Response, maxBody int) error {
	if maxBody == 0 {
		maxBody = defaultMaxBody
	}
	if resp.Status < 0 || resp.Status > maxStatus {
		return fmt.Errorf("response status %d: idemnode accepts 0-%d", resp.Status, maxStatus)
	}
	if len(resp.Body) > maxBody {
		return fmt.Errorf("response body of %d bytes: idemnode accepts at most %d (Options.MaxBody)", len(resp.Body), maxBody)
	}
	if len(resp.Headers) > maxHeaders {
		return fmt.Errorf("%d response headers: idemnode accepts at most %d", len(resp.Headers), maxHeaders)
	}
	size := 0
	for i, h := range resp.Headers {
		if !httpguts.ValidHeaderFieldName(h.Name) {
			return fmt.Errorf("response header %d: name %q is not an HTTP token", i, h.Name)
		}
		if j := strings.IndexAny(h.Value, "\r\n\x00"); j >= 0 {
			return fmt.Errorf("response header %d (%s): value has byte 0x%02x at %d; CR, LF and NUL are refused", i, h.Name, h.Value[j], j)
		}
		if !utf8.ValidString(h.Value) {
			return fmt.Errorf("response header %d (%s): value is not valid UTF-8", i, h.Name)
		}
		size += len(h.Name) + len(h.Value)
	}
	if size > maxHeaderBytes {
		return fmt.Errorf("response headers of %d bytes: idemnode accepts at most %d", size, maxHeaderBytes)
	}
	return nil
}
