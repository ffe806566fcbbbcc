package idemhttp

import (
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/idemnode/idemnode/client"
)

// recorder captures what the handler writes, so that the response can be
// stored before it is sent and sent identically on every replay. It holds
// at most limit body bytes: a larger response cannot be stored anyway, so
// from then on it streams to the caller (what it held first, then each
// write), and a request costs the stored limit plus a constant whatever
// the handler sends.
type recorder struct {
	header http.Header
	// sent is the header as it was when the status was written: later
	// changes to the map do not reach the wire, in net/http either.
	sent   http.Header
	status int
	// body is what the handler wrote, up to limit: its capacity never
	// exceeds limit (growth is capped there, not doubled past it).
	body []byte

	w     http.ResponseWriter // the caller's
	limit int
	// streamed: the body outgrew limit, and the response went out to w.
	streamed bool
	// bodyLen counts every body byte the handler wrote.
	bodyLen int64
	// broken is why the handler could not finish the response it began
	// (ResponseBroken).
	broken error
	// notAnswer: what the handler writes is its own failure to get an
	// answer (NotAnAnswer).
	notAnswer bool
}

func newRecorder(w http.ResponseWriter, limit int) *recorder {
	return &recorder{header: http.Header{}, w: w, limit: limit}
}

// Header returns the header map the handler fills.
func (r *recorder) Header() http.Header { return r.header }

// WriteHeader records the status; informational (1xx) statuses are not
// part of the stored answer and are dropped.
func (r *recorder) WriteHeader(code int) {
	if r.status != 0 || (code >= 100 && code < 200) {
		return
	}
	r.status = code
	r.sent = r.header.Clone()
}

// Write records body bytes, writing the status 200 first if needed, and
// streams once the body is over the limit.
func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(r.status) {
		return 0, http.ErrBodyNotAllowed
	}
	r.bodyLen += int64(len(p))
	if !r.streamed && len(r.body)+len(p) <= r.limit {
		r.hold(p)
		return len(p), nil
	}
	if !r.streamed {
		if err := r.stream(); err != nil {
			return 0, err
		}
	}
	return r.w.Write(p)
}

// stream sends the status, the headers and the body held so far to the
// caller, and holds no more.
func (r *recorder) stream() error {
	r.streamed = true
	h := r.w.Header()
	for name, vs := range r.sent {
		if !hopByHop[http.CanonicalHeaderKey(name)] {
			h[name] = vs
		}
	}
	r.w.WriteHeader(wireStatus(r.status))
	held := r.body
	r.body = nil
	_, err := r.w.Write(held)
	return err
}

// hold appends p, which fits within the limit, to the body.
func (r *recorder) hold(p []byte) {
	if n := len(r.body) + len(p); n > cap(r.body) {
		grown := make([]byte, len(r.body), min(max(2*cap(r.body), n, 512), r.limit))
		copy(grown, r.body)
		r.body = grown
	}
	r.body = append(r.body, p...)
}

// Flush sends what was written when the response streams; a response
// still held has nothing on the wire to flush.
func (r *recorder) Flush() {
	if r.streamed {
		_ = http.NewResponseController(r.w).Flush()
	}
}

// ResponseBroken tells the middleware that the response the handler began
// on w cannot be finished: the body it relays broke off, or did not come
// in time (a cause that is a timeout). The handler writes nothing more and
// returns. The middleware then never sends a part of a response as if it
// were whole: when nothing has reached the caller yet, the caller gets a
// 502 problem (504 for a timeout) of type ProblemResponseBroken; when the
// response already streams (it is over Config.MaxStoredBody), the
// connection is cut. When the handler had written a status that is
// stored, the operation ran: the key keeps the not-kept marker and is
// never released. It reports whether w is the middleware's recorder; when
// it is not, the failure is the caller's to handle.
func ResponseBroken(w http.ResponseWriter, cause error) bool {
	r, ok := w.(*recorder)
	if !ok {
		return false
	}
	if r.broken == nil {
		r.broken = cause
	}
	return true
}

// NotAnAnswer tells the middleware that what the handler writes on w is
// not the operation's answer but its own failure to get one, such as the
// proxy's 502 when the upstream refused the connection or its 504 when no
// response headers came: it is sent as written, never stored, and the key
// is released whatever Config.Store says, so the retry runs again. Call it
// before writing. It reports whether w is the middleware's recorder.
func NotAnAnswer(w http.ResponseWriter) bool {
	r, ok := w.(*recorder)
	if ok {
		r.notAnswer = true
	}
	return ok
}

// hopByHop headers describe one connection and are never stored.
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// response is what the handler produced, in a stable form: headers sorted
// by name (values in the handler's order), and the Content-Type that
// net/http would have sniffed made explicit, so the first answer and every
// replay carry the same header lines.
func (r *recorder) response() client.Response {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	h := r.sent
	body := r.body
	if _, set := h["Content-Type"]; !set && len(body) > 0 && h.Get("Content-Encoding") == "" && !r.streamed {
		h.Set("Content-Type", http.DetectContentType(body))
	}
	out := client.Response{Status: r.status, Body: slices.Clone(body)}
	names := make([]string, 0, len(h))
	for name := range h {
		if !hopByHop[http.CanonicalHeaderKey(name)] {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if !httpguts.ValidHeaderFieldName(name) {
			continue // net/http drops it from the wire, and idemnode refuses to store it
		}
		for _, v := range h[name] {
			if v, ok := wireValue(v); ok {
				out.Headers = append(out.Headers, client.Header{Name: name, Value: v})
			}
		}
	}
	return out
}

// wireValue is a header value as net/http's HTTP/1.1 writer sends it (CR
// and LF turned into spaces, the ends trimmed), which idemnode stores: it
// refuses CR, LF and NUL, so no replay can split a response. A value with
// NUL, which HTTP/2 would drop, or not valid UTF-8 (a proto string) is
// dropped, from the first answer as from every replay.
var crlfToSpace = strings.NewReplacer("\r", " ", "\n", " ")

func wireValue(v string) (string, bool) {
	v = textproto.TrimString(crlfToSpace.Replace(v))
	return v, !strings.Contains(v, "\x00") && utf8.ValidString(v)
}

// writeResponse sends the handler's fresh response. Content-Length is set
// from the body, for fresh and stored responses alike (writeStored), so
// both are framed alike.
func writeResponse(w http.ResponseWriter, resp client.Response) {
	writeStored(w, resp, false, time.Time{})
}

// writeReplay sends a stored response, saying it is one and when it was
// stored.
func writeReplay(w http.ResponseWriter, resp client.Response, completedAt time.Time) {
	writeStored(w, resp, true, completedAt)
}

// writeStored sends resp; a replay's marks replace any stored header of
// the same name.
func writeStored(w http.ResponseWriter, resp client.Response, replayed bool, completedAt time.Time) {
	h := w.Header()
	for _, hd := range resp.Headers {
		h[hd.Name] = append(h[hd.Name], hd.Value)
	}
	if replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	if at := timeString(completedAt); at != "" {
		h.Set(HeaderCompletedAt, at)
	}
	status := wireStatus(resp.Status)
	if bodyAllowed(status) && h.Get("Content-Length") == "" {
		h.Set("Content-Length", strconv.Itoa(len(resp.Body)))
	}
	w.WriteHeader(status)
	if bodyAllowed(status) {
		_, _ = w.Write(resp.Body)
	}
}

// wireStatus is the status sent for a recorded one: net/http refuses
// what is not a final status of three digits.
func wireStatus(status int) int {
	if status < 200 || status > 999 {
		return http.StatusOK
	}
	return status
}

// bodyAllowed reports whether a response with status may have a body.
func bodyAllowed(status int) bool {
	return status != http.StatusNoContent && status != http.StatusNotModified && (status < 100 || status >= 200)
}
