package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/store"
)

// version is the release, set at build time:
//
//	go build -ldflags "-X main.version=v1.2.0 -X main.commit=$(git rev-parse HEAD)" ./cmd/idemnode
//
// Without -X, both come from what the go command records (see stamp).
var version, commit = "dev", ""

// formatVersions are the versions of the formats this binary writes, and
// the oldest it still reads. TestVersionFormatsMatchFSM checks them against
// what fsm and store write.
var formatVersions = []formatVersion{
	// fsm/encoding.go: commandFormat; commandFormatV1 (no checksum) is read.
	{Name: "log_command", Writes: 2, ReadsFrom: 1},
	// fsm/snapshot.go: version 4, records in key order and the abandoned
	// feed (a state that never had an event writes 3); 1 and 2 (the
	// in-memory releases' streams) are read. The backup file (snapshot
	// save/restore) is this same stream.
	{Name: "snapshot_stream", Writes: fsm.SnapshotVersion, ReadsFrom: 1},
	// store/keys.go: the on-disk layout of the records (Pebble); a store
	// of version 1 (records under their keys) is rewritten into version 2
	// (records at their positions) at its first start, and a data dir of
	// the in-memory releases (no store) is migrated into a new store.
	{Name: "store", Writes: store.FormatVersion, ReadsFrom: 1},
	// fsm/digest.go: the state digest status shows; restoring a version 2
	// stream prints the version 1 digest its release showed.
	{Name: "digest", Writes: fsm.DigestVersion, ReadsFrom: 1},
}

type formatVersion struct {
	Name      string `json:"name"`
	Writes    int    `json:"writes"`
	ReadsFrom int    `json:"reads_from"`
}

type versionInfo struct {
	Version  string          `json:"version"`
	Commit   string          `json:"commit"`
	Go       string          `json:"go"`
	Platform string          `json:"platform"`
	Formats  []formatVersion `json:"formats"`
}

func buildInfo() versionInfo {
	bi, _ := debug.ReadBuildInfo()
	return stamp(version, commit, bi)
}

// stamp is the version and commit a binary reports: those -ldflags -X set
// (scripts/release.sh sets both), else what the go command recorded in bi
// (nil: nothing). `go install …/cmd/idemnode@v0.2.0` records the module
// version v0.2.0 and no VCS revision (the module proxy serves no history);
// a build in a clone records the revision, and "-modified" is added when the
// tree had changes (untracked files count, as for the go command).
func stamp(version, commit string, bi *debug.BuildInfo) versionInfo {
	v := versionInfo{Version: version, Commit: commit, Go: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, Formats: formatVersions}
	if bi != nil && v.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v.Version = bi.Main.Version
	}
	if bi != nil && v.Commit == "" {
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" && modified == "true" {
			rev += "-modified"
		}
		v.Commit = rev
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	return v
}

// versionText is what `idemnode version` and `idemnode --version` print.
func versionText() string {
	v := buildInfo()
	var b strings.Builder
	fmt.Fprintf(&b, "idemnode %s\ncommit: %s\ngo: %s %s\n", v.Version, v.Commit, v.Go, v.Platform)
	for _, f := range v.Formats {
		fmt.Fprintf(&b, "format %s: writes v%d, reads v%d-v%d\n", f.Name, f.Writes, f.ReadsFrom, f.Writes)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func newVersionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "version",
		Short:   "Print the version, commit, Go version and the format versions it reads and writes",
		Example: "  idemnode version -o json",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			switch output {
			case "json":
				return json.NewEncoder(os.Stdout).Encode(buildInfo())
			case "text":
				_, err := fmt.Println(versionText())
				return err
			}
			return fmt.Errorf("-o must be text or json, got %q", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
