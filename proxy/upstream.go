package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"time"

	"github.com/idemnode/idemnode/idemhttp"
)

// The causes a guarded call to the upstream is cut off with. Both are
// timeouts (they wrap context.DeadlineExceeded), answered 504.
var (
	errHeaderTimeout = fmt.Errorf("the upstream sent no response headers within --upstream-timeout: %w", context.DeadlineExceeded)
	errBodyTimeout   = fmt.Errorf("the upstream's response body did not end within --upstream-body-timeout: %w", context.DeadlineExceeded)
)

// call is one guarded request on its way to the upstream: the deadline of
// each phase (the headers within UpstreamTimeout, then the body within
// UpstreamBodyTimeout), and what broke the body. Its methods run on the
// handler's goroutine; the timers only cancel the request's context.
type call struct {
	cancel      context.CancelCauseFunc
	timer       *time.Timer
	bodyTimeout time.Duration
	bodyErr     error
}

type callKey struct{}

// serveGuarded forwards a guarded request. It runs to the upstream's
// answer even when its caller goes away (a client timeout, a closed
// connection): the upstream has likely acted, and its answer must be
// stored for the retry. Cut off, the proxy would answer 502, release the
// key, and the retry would run the upstream again.
func serveGuarded(rp *httputil.ReverseProxy, cfg Config, w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	defer cancel(nil)
	c := &call{cancel: cancel, bodyTimeout: cfg.UpstreamBodyTimeout}
	c.timer = time.AfterFunc(cfg.UpstreamTimeout, func() { cancel(errHeaderTimeout) })
	defer func() { c.timer.Stop() }() // the body's timer by then, if the headers came
	defer func() {
		// ReverseProxy panics with ErrAbortHandler when it cannot copy the
		// body, after the status went to the middleware: tell it why, so it
		// keeps the key of a stored status and answers the documented
		// problem instead of an empty reply.
		p := recover()
		if p != nil && p != http.ErrAbortHandler { //nolint:errorlint // ReverseProxy panics with this very value
			panic(p)
		}
		cause := c.bodyErr
		if cause == nil && p != nil {
			cause = errors.New("the response could not be relayed to the caller")
		}
		if cause != nil && !idemhttp.ResponseBroken(w, cause) {
			panic(http.ErrAbortHandler)
		}
	}()
	rp.ServeHTTP(w, r.WithContext(context.WithValue(ctx, callKey{}, c)))
}

// gotHeaders is ReverseProxy's ModifyResponse: the headers came in time,
// so the body's own deadline starts, and its reads are watched.
func gotHeaders(res *http.Response) error {
	c, guarded := res.Request.Context().Value(callKey{}).(*call)
	if !guarded || res.StatusCode == http.StatusSwitchingProtocols {
		return nil // an upgrade's body is a connection ReverseProxy takes over
	}
	if c.timer.Stop() {
		c.timer = time.AfterFunc(c.bodyTimeout, func() { c.cancel(errBodyTimeout) })
	}
	res.Body = &watchedBody{ReadCloser: res.Body, call: c, ctx: res.Request.Context()}
	return nil
}

// watchedBody records why the upstream's body could not be read to its
// end.
type watchedBody struct {
	io.ReadCloser
	call *call
	ctx  context.Context
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		b.call.timer.Stop()
	case b.call.bodyErr == nil && errors.Is(context.Cause(b.ctx), errBodyTimeout):
		b.call.bodyErr = errBodyTimeout
	case b.call.bodyErr == nil:
		b.call.bodyErr = fmt.Errorf("read the upstream's response body: %w", err)
	}
	return n, err
}
