package idemhttp

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// countingWriter is a caller's ResponseWriter that keeps only a count of
// the body bytes.
type countingWriter struct {
	header http.Header
	status int
	n      int
}

func (w *countingWriter) Header() http.Header         { return w.header }
func (w *countingWriter) WriteHeader(status int)      { w.status = status }
func (w *countingWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// TestRecorderHoldsAtMostTheLimit (finding 2): the recorder holds a
// response up to the stored limit and sends nothing; past it, it streams,
// and never holds more than the limit, however much the handler writes.
func TestRecorderHoldsAtMostTheLimit(t *testing.T) {
	const limit, total = 1 << 20, 64 << 20
	dst := &countingWriter{header: http.Header{}}
	rec := newRecorder(dst, limit)
	rec.Header().Set("Content-Type", "application/octet-stream")
	rec.WriteHeader(http.StatusCreated)
	chunk := make([]byte, 32<<10)
	for written := 0; written < total; written += len(chunk) {
		if _, err := rec.Write(chunk); err != nil {
			t.Fatal(err)
		}
		if cap(rec.body) > limit {
			t.Fatalf("after %d bytes the recorder holds %d, over the %d limit", written+len(chunk), cap(rec.body), limit)
		}
		if written+len(chunk) <= limit && (dst.status != 0 || dst.n != 0) {
			t.Fatalf("after %d bytes, within the limit, the caller got HTTP %d and %d bytes: want nothing yet", written+len(chunk), dst.status, dst.n)
		}
	}
	if !rec.streamed || dst.status != http.StatusCreated || dst.n != total || rec.bodyLen != total ||
		dst.header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("streamed %v: the caller got HTTP %d %v and %d bytes of %d", rec.streamed, dst.status, dst.header, dst.n, total)
	}
}

// TestMarksOnlyTheRecorder: ResponseBroken and NotAnAnswer mark the
// middleware's recorder, and say so; any other ResponseWriter is left to
// its handler.
func TestMarksOnlyTheRecorder(t *testing.T) {
	rec := newRecorder(httptest.NewRecorder(), 1024)
	if !ResponseBroken(rec, errBroken) || rec.broken != errBroken || !NotAnAnswer(rec) || !rec.notAnswer {
		t.Fatalf("the recorder was not marked: broken %v, not an answer %v", rec.broken, rec.notAnswer)
	}
	if ResponseBroken(httptest.NewRecorder(), errBroken) || NotAnAnswer(httptest.NewRecorder()) {
		t.Fatal("a ResponseWriter that is not the middleware's was claimed")
	}
}

var errBroken = http.ErrAbortHandler
