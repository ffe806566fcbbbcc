package rpc

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestCallTimeoutsRunOnTheServersClock: no code of the server ends a call
// or a wait by the runtime's clock; every timeout goes through s.clock
// (clock.WithTimeout, s.clock.NewTimer). The tests that advance a fake
// clock instead of sleeping out a lease or a wait
// (TestForwardedWaitWithoutDeadlineLastsAsAsked) could not see a timeout
// taken from the runtime: this is what keeps them meaningful.
func TestCallTimeoutsRunOnTheServersClock(t *testing.T) {
	forbidden := map[string]bool{
		"context.WithTimeout": true, "context.WithDeadline": true,
		"time.NewTimer": true, "time.AfterFunc": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && forbidden[pkg.Name+"."+sel.Sel.Name] {
				t.Errorf("%s: %s.%s runs on the runtime's clock; use the server's (clock.WithTimeout, s.clock)",
					fset.Position(sel.Pos()), pkg.Name, sel.Sel.Name)
			}
			return true
		})
	}
	if checked < 10 {
		t.Fatalf("checked %d files; is the test running in rpc/?", checked)
	}
}
