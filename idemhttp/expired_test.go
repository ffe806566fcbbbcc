package idemhttp

import (
	"errors"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
)

// TestExpiredDetail (finding 10): the 410's detail says when the operation
// completed and, apart from it, when its record expired, in a sentence
// that reads: not "completed at X, at Y".
func TestExpiredDetail(t *testing.T) {
	ran := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	gone := ran.Add(24 * time.Hour)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&client.ExpiredError{ExpiresAt: gone, CompletedAt: ran},
			"This operation ran and completed at 2026-01-02T03:04:05Z; its record expired at 2026-01-03T03:04:05Z and its response is gone. " +
				"Do not send it again with a new key: look its result up instead."},
		{&client.ExpiredError{ExpiresAt: gone},
			"This operation may have run: it was still in progress when its record expired at 2026-01-03T03:04:05Z, and its response is gone. " +
				"Do not send it again with a new key: look its result up instead."},
		{errors.New("expired"),
			"This operation ran, or may have, and its record expired: its response is gone. Do not send it again with a new key."},
	} {
		if got := expired(tc.err, false).Detail; got != tc.want {
			t.Errorf("detail of %v:\n got %q\nwant %q", tc.err, got, tc.want)
		}
	}
}
