package rpc

import "testing"

// skipInShort skips t under `go test -short`, the inner loop, saying why it
// is too slow for it: what the test does. scripts/test.sh runs it.
func skipInShort(t *testing.T, why string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: " + why)
	}
}

// SkipInShort is skipInShort for the rpc_test package's tests.
var SkipInShort = skipInShort
