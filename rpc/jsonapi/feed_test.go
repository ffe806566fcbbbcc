package jsonapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestFeedCursorAheadOverHTTP: a cursor past the cluster's last feed event
// is refused over HTTP too, for the watch (whose error line is the stream's
// only one) and the list: 400 with reason FEED_CURSOR_AHEAD and last_seq.
func TestFeedCursorAheadOverHTTP(t *testing.T) {
	base := shared.Nodes[0].JSONURL()
	body := `{"afterSeq":"18446744073709551615"}`
	for _, path := range []string{"/v1/watch_abandoned", "/v1/list_abandoned"} {
		a := call(t, base, http.MethodPost, path, body)
		var out struct {
			Error   json.RawMessage
			Details []struct {
				Reason   string
				Metadata map[string]string
			}
		}
		err := json.Unmarshal(a.body, &out)
		if err == nil && out.Error != nil {
			err = json.Unmarshal(out.Error, &out) // the stream's {"error": …} line
		}
		if err != nil || a.status != http.StatusBadRequest || len(out.Details) == 0 || out.Details[0].Reason != "FEED_CURSOR_AHEAD" ||
			out.Details[0].Metadata["last_seq"] == "" {
			t.Errorf("POST %s %s: HTTP %d %s, want 400 FEED_CURSOR_AHEAD with last_seq", path, body, a.status, a.body)
		}
	}
}
