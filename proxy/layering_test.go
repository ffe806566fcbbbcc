package proxy

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLibrariesDoNotImportTheNode: the packages a service imports to talk
// to idemnode (the SDK, the middleware, the proxy) must not pull in the
// node: its wiring, Raft and the store. The proxy once reached server/ for
// its HTTP helpers.
func TestLibrariesDoNotImportTheNode(t *testing.T) {
	const mod = "github.com/idemnode/idemnode/"
	out, err := exec.Command("go", "list", "-deps", mod+"client", mod+"idemhttp", mod+"proxy").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, node := range []string{"server", "cluster", "store", "fsm", "rpc"} {
			if dep == mod+node {
				t.Errorf("the client-side packages import %s", dep)
			}
		}
		if strings.HasPrefix(dep, "github.com/hashicorp/raft") || strings.HasPrefix(dep, "github.com/cockroachdb/pebble") {
			t.Errorf("the client-side packages import %s", dep)
		}
	}
}
