package pgtest

import (
	"errors"
	"testing"
)

// recorder is a testing.TB that records Skip and Fatal instead of ending.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper()              {}
func (r *recorder) Skip(...any)          { r.skipped = true }
func (r *recorder) Fatal(...any)         { r.failed = true }
func (r *recorder) Skipf(string, ...any) { r.skipped = true }

func TestRequire(t *testing.T) {
	other := errors.New("initdb failed")
	for _, tc := range []struct {
		name            string
		ci, require     string
		err             error
		skipped, failed bool
	}{
		{name: "server found", err: nil},
		{name: "no server, not CI", err: ErrNoBinaries, skipped: true},
		{name: "no server, CI", ci: "true", err: ErrNoBinaries, failed: true},
		{name: "no server, .ci/run", require: "1", err: ErrNoBinaries, failed: true},
		{name: "server broken, not CI", err: other, failed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			t.Setenv("IDEMNODE_REQUIRE_POSTGRES", tc.require)
			r := &recorder{}
			Require(r, tc.err)
			if r.skipped != tc.skipped || r.failed != tc.failed {
				t.Errorf("skipped %v, failed %v; want %v, %v", r.skipped, r.failed, tc.skipped, tc.failed)
			}
		})
	}
}
