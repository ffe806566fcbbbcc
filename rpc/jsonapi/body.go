package jsonapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
)

// maxBodyBytes is the largest JSON body for a gRPC message limit: bytes
// travel in base64 (4 characters for 3 bytes), and names, quotes and
// escapes add to it.
func maxBodyBytes(maxMessage int) int64 {
	return int64(maxMessage)/3*4 + 64<<10
}

// checkBody reads a request's body whole, up to limit, and refuses one that
// is larger or is not a single JSON value: the gateway's decoder would read
// the first value and ignore whatever follows it. A string holding half a
// UTF-16 surrogate pair is refused saying so (surrogate.go). A POST must say it is
// JSON: a browser sends form and text bodies cross-site without asking
// first, so any other Content-Type could come from a page the caller
// visited, riding on its network position or client certificate.
func checkBody(next http.Handler, limit int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && !isJSON(r.Header.Get("Content-Type")) {
			writeStatus(w, r, errorStatus(codes.InvalidArgument, reasonInvalidJSON,
				fmt.Sprintf("Content-Type %q: the body must be application/json", r.Header.Get("Content-Type"))),
				http.StatusUnsupportedMediaType)
			return
		}
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			refuse(w, r, invalidField("body", strconv.FormatInt(limit, 10)+" bytes", "the request body is larger"))
			return
		case err != nil:
			refuse(w, r, errorStatus(codes.InvalidArgument, reasonInvalidJSON, "request body: "+err.Error()))
			return
		case len(bytes.TrimSpace(b)) > 0 && !json.Valid(b):
			refuse(w, r, errorStatus(codes.InvalidArgument, reasonInvalidJSON, "request body: not one JSON value"))
			return
		}
		if err := loneSurrogate(b); err != nil {
			refuse(w, r, errorStatus(codes.InvalidArgument, reasonInvalidJSON, "request body: "+err.Error()))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		next.ServeHTTP(w, r)
	})
}

// isJSON reports whether a Content-Type is application/json or a +json type.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}
