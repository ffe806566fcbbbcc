package idempg_test

import (
	"os"
	"testing"

	"github.com/idemnode/idemnode/contrib/idempg/internal/pgtest"
)

// TestMain runs the holder subprocesses of holders_test.go when the test
// binary is started as one, and otherwise the tests, stopping the shared
// PostgreSQL server after them.
func TestMain(m *testing.M) {
	if mode := os.Getenv(holderEnv); mode != "" {
		os.Exit(holderMain(mode))
	}
	code := m.Run()
	pgtest.StopShared()
	os.Exit(code)
}
