package main

import (
	"bytes"
	endian "encoding/binary"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/store"
)

// TestVersion: `idemnode version` and `--version` print the version, the
// commit, the Go version and the format versions; -ldflags sets the first
// two.
func TestVersion(t *testing.T) {
	t.Parallel()
	text, stderr, code := cli(t, "version")
	if code != exitOK || stderr != "" {
		t.Fatalf("version: exit %d, stderr %q", code, stderr)
	}
	for _, line := range []string{"idemnode dev\n", "commit: ", "go: " + runtime.Version() + " ",
		"format log_command: writes v2, reads v1-v2\n", "format snapshot_stream: writes v5, reads v1-v5\n",
		"format store: writes v3, reads v1-v3\n", "format digest: writes v2, reads v1-v2\n"} {
		if !strings.Contains(text, line) {
			t.Errorf("version prints\n%s\nwithout %q", text, line)
		}
	}
	if flag, _, code := cli(t, "--version"); code != exitOK || flag != text {
		t.Errorf("--version: exit %d, prints\n%s\nwant what version prints:\n%s", code, flag, text)
	}
	var v versionInfo
	stdout, _, _ := cli(t, "version", "-o", "json")
	if err := json.Unmarshal([]byte(stdout), &v); err != nil || v.Version != "dev" || v.Go != runtime.Version() || len(v.Formats) != 4 {
		t.Errorf("version -o json = %q (%v)", stdout, err)
	}

	stamped := filepath.Join(t.TempDir(), "idemnode")
	build := exec.Command("go", "build", "-o", stamped, "-ldflags", "-X main.version=v9.8.7 -X main.commit=0123abc", ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build with -ldflags: %v\n%s", err, out)
	}
	out, err := exec.Command(stamped, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "idemnode v9.8.7\ncommit: 0123abc\n") {
		t.Errorf("a binary built with -X prints %q (%v)", out, err)
	}
}

// TestVersionFormatsMatchFSM: the format versions version.go states are the
// ones fsm writes, so a new format cannot ship with a stale table.
func TestVersionFormatsMatchFSM(t *testing.T) {
	t.Parallel()
	written := map[string]int{}
	written["log_command"] = int(fsm.EncodeCommand(&fsm.Command{Type: fsm.TypeExpire, Now: 1, Limit: 1})[0])
	var snap bytes.Buffer
	m, err := fsm.New(fsm.NewMemStore())
	if err != nil {
		t.Fatal(err)
	}
	// A state with an event of the abandoned feed and a cluster identity,
	// which only the newest stream version carries (a state without them
	// streams as version 3).
	m.Apply(1, &fsm.Command{Type: fsm.TypeClaim, Now: 1, Key: fsm.RecordKey{Key: "k"}, Owner: "o",
		Lease: int64(time.Second), TTL: int64(time.Hour), WatchAbandon: true})
	m.Apply(2, &fsm.Command{Type: fsm.TypeExpire, Now: 1 + int64(2*time.Second), Limit: 10})
	m.Apply(3, &fsm.Command{Type: fsm.TypeIdentify, Cluster: []byte("cluster")})
	if m.Meta().Feed.Events == 0 {
		t.Fatal("no event to stream")
	}
	if err := m.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	header := bytes.TrimPrefix(snap.Bytes(), []byte("IDEMSNAP"))
	v, n := endian.Uvarint(header)
	if n <= 0 || len(header) == snap.Len() {
		t.Fatalf("snapshot header %q: no magic or version", snap.Bytes()[:min(16, snap.Len())])
	}
	written["snapshot_stream"] = int(v)
	written["store"] = storeFormatOnDisk(t)
	written["digest"] = fsm.DigestVersion // no bytes carry it; fsm/digest.go tags its hash with it
	for _, f := range formatVersions {
		if written[f.Name] != f.Writes {
			t.Errorf("version.go says %s v%d, fsm writes v%d", f.Name, f.Writes, written[f.Name])
		}
		delete(written, f.Name)
	}
	if len(written) != 0 {
		t.Errorf("formats fsm writes that version.go does not list: %v", written)
	}
}

// storeFormatOnDisk opens a new store and reads the format version it wrote.
func storeFormatOnDisk(t *testing.T) int {
	dir := t.TempDir()
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := pebble.Open(filepath.Join(dir, "store-000001"), &pebble.Options{DisableWAL: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b, closer, err := db.Get([]byte("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	v, _ := endian.Uvarint(b)
	return int(v)
}

// TestStampFromBuildInfo: without -X, the version is the module version the
// go command recorded (what `go install …@v0.2.0` gives), and the commit
// its VCS revision, "-modified" for a changed tree; -X wins over both.
func TestStampFromBuildInfo(t *testing.T) {
	t.Parallel()
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		name                    string
		version, commit         string
		bi                      *debug.BuildInfo
		wantVersion, wantCommit string
	}{
		{"go install from the module proxy", "dev", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}}, "v0.2.0", "unknown"},
		{"a build without VCS stamp", "dev", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev", "unknown"},
		{"a clean clone", "dev", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("abc123", "false")}, "dev", "abc123"},
		{"a changed clone", "dev", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.2.1-0.20261203081405-abc123+dirty"}, Settings: vcs("abc123", "true")},
			"v0.2.1-0.20261203081405-abc123+dirty", "abc123-modified"},
		{"-ldflags -X", "v9.8.7", "0123abc", &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}, Settings: vcs("abc123", "true")}, "v9.8.7", "0123abc"},
		{"no build info", "dev", "", nil, "dev", "unknown"},
	} {
		if v := stamp(tc.version, tc.commit, tc.bi); v.Version != tc.wantVersion || v.Commit != tc.wantCommit {
			t.Errorf("%s: version %q, commit %q; want %q, %q", tc.name, v.Version, v.Commit, tc.wantVersion, tc.wantCommit)
		}
	}
}
