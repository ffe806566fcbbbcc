package checker

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemnode/idemnode/jepsen/history"
)

var update = flag.Bool("update", false, "rewrite testdata/ from the builders")

// staleRead is clean() with a get that returns the PENDING record after its
// completion was acknowledged.
func staleRead() *builder {
	b := clean()
	b.read(200, 210, history.FGet, "n2", "k1", pending(10, 1, at(2), at(10)))
	return b
}

func sampleFaults() []history.Fault {
	return []history.Fault{
		{Time: 15 * ms, Name: "kill-leader", Phase: history.FaultStart, Detail: "n1"},
		{Time: 95 * ms, Name: "kill-leader", Phase: history.FaultEnd, Detail: "n1"},
	}
}

// The files in testdata/ are histories as the harness writes them (and
// examples of the format); they are read back through package history.
func TestTestdata(t *testing.T) {
	for name, c := range map[string]struct {
		b  *builder
		ok bool
	}{"clean": {clean(), true}, "stale-read": {staleRead(), false}} {
		hist := filepath.Join("testdata", name+".history.jsonl")
		nem := filepath.Join("testdata", name+".nemesis.jsonl")
		if *update {
			writeTestdata(t, hist, nem, c.b.history())
		}
		events := readFile(t, hist, history.Read)
		faults := readFile(t, nem, history.ReadFaults)
		r := Check(events, faults, Options{VisualizeDir: t.TempDir()})
		if r.OK() != c.ok {
			t.Fatalf("%s: OK() = %v, want %v\n%s", name, r.OK(), c.ok, r.Summary())
		}
		if len(r.Availability.Recoveries) != 1 || !r.Availability.Recoveries[0].Found {
			t.Fatalf("%s: recoveries = %+v", name, r.Availability.Recoveries)
		}
	}
}

func readFile[T any](t *testing.T, path string, read func(io.Reader) ([]T, error)) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, err := read(f)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return out
}

func writeTestdata(t *testing.T, hist, nem string, events []history.Event) {
	t.Helper()
	w, err := history.Create(hist)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if err := w.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, err = history.Create(nem)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range sampleFaults() {
		if err := w.AddFault(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
