package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemnode/idemnode/internal/testutil"
)

// previousRelease is the commit of the release before cluster identities:
// the one a rolling upgrade starts from.
const previousRelease = "fd03d6b"

// buildPreviousRelease builds previousRelease's idemnode from this
// repository's history. Without the history (a shallow or exported tree)
// the test skips, except in CI, where it must run.
func buildPreviousRelease(t *testing.T) string {
	t.Helper()
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err == nil {
		err = exec.Command("git", "cat-file", "-e", previousRelease+"^{commit}").Run()
	}
	if err != nil {
		// Only a shallow clone may lack the commit; in a full one (CI's)
		// its absence is a fault, not a reason to skip.
		shallow, _ := exec.Command("git", "rev-parse", "--is-shallow-repository").Output()
		if os.Getenv("CI") != "" && strings.TrimSpace(string(shallow)) == "false" {
			t.Fatalf("CI must run the rolling upgrade: commit %s is not in this clone: %v", previousRelease, err)
		}
		t.Skipf("the previous release %s cannot be built here (no git history, or a shallow clone): %v", previousRelease, err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	repo := strings.TrimSpace(string(root))
	if out, err := exec.Command("git", "-C", repo, "worktree", "add", "--detach", src, previousRelease).CombinedOutput(); err != nil {
		t.Fatalf("check out %s: %v\n%s", previousRelease, err, out)
	}
	t.Cleanup(func() { exec.Command("git", "-C", repo, "worktree", "remove", "--force", src).Run() })
	bin := filepath.Join(dir, "idemnode-"+previousRelease)
	build := exec.Command("go", append(append([]string{"build"}, raceFlag...), "-o", bin, "./cmd/idemnode")...)
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", previousRelease, err, out)
	}
	return bin
}

// TestRollingUpgradeGivesTheClusterAnIdentity upgrades a three-node
// cluster of the previous release one node at a time, as a rolling
// upgrade does, with writes before, between and after every step: old and
// new nodes replicate together, the cluster gets no identity while an old
// voter remains (an old node could not answer the identity handshake), and
// once the last node runs this release every node holds one and the same
// identity, with every record written before still answered from the
// record.
func TestRollingUpgradeGivesTheClusterAnIdentity(t *testing.T) {
	t.Parallel()
	needBinary(t)
	old := buildPreviousRelease(t)
	nodes := make([]*server, 3)
	for i := range nodes {
		nodes[i] = newServer(t, nil, nil)
		nodes[i].nodeID, nodes[i].bin = fmt.Sprintf("n%d", i+1), old
	}
	launchCluster(nodes, nil)
	written, bodies := 0, t.TempDir()
	write := func(via *server) {
		t.Helper()
		written++
		key := fmt.Sprintf("order-%d", written)
		body := filepath.Join(bodies, key)
		if err := os.WriteFile(body, []byte("body of "+key), 0o600); err != nil {
			t.Fatal(err)
		}
		id := []string{"--tenant", "acme", "--scope", "POST /v1/charges", "--key", key}
		var c claimJSON
		via.cliJSON(0, &c, append([]string{"claim", "--fingerprint", fmt.Sprintf("%x", key), "--owner", "o-" + key}, id...)...)
		var done struct{ Outcome string }
		via.cliJSON(0, &done, append([]string{"complete", "--token", fmt.Sprint(c.Token), "--status", "201", "--body-file", body}, id...)...)
	}
	identities := func() []string {
		var out []string
		for _, n := range nodes {
			var st struct {
				ClusterID string `json:"cluster_id"`
			}
			n.cliJSON(0, &st, "status")
			out = append(out, st.ClusterID)
		}
		return out
	}
	write(nodes[0])
	for i, n := range nodes {
		stop(t, n)
		write(nodes[(i+1)%3]) // two nodes still commit
		if i == len(nodes)-1 {
			// SIGTERM removed the last old node from the configuration, and
			// every voter left runs this release. A pod's replacement takes
			// a while: give the leader several identity ticks (one a second)
			// before it comes back, as a slower restart would.
			awaitRemoved(t, nodes[0], n.nodeID)
			time.Sleep(3 * time.Second)
		}
		n.bin = ""
		n.start()
		write(n)
		if i < len(nodes)-1 {
			if ids := identities(); strings.Join(ids, "") != "" {
				t.Fatalf("after upgrading %d of 3 nodes the cluster has identities %q: an old voter could not check them", i+1, ids)
			}
		}
	}
	var id string
	testutil.Eventually(t, 30*time.Second, "one identity on every upgraded node", func() bool {
		ids := identities()
		id = ids[0]
		return id != "" && ids[1] == id && ids[2] == id
	})
	t.Logf("cluster identity %s after the last node was upgraded", id)
	for i := 1; i <= written; i++ {
		key := fmt.Sprintf("order-%d", i)
		var c claimJSON
		nodes[i%3].cliJSON(4, &c, "claim", "--tenant", "acme", "--scope", "POST /v1/charges", "--key", key, "--fingerprint", fmt.Sprintf("%x", key))
		if c.Outcome != "completed" || c.Response == nil || c.Response.Body != "body of "+key {
			t.Fatalf("%s after the upgrade: %+v", key, c)
		}
	}
	write(nodes[1])
}

// stop sends SIGTERM, as a rolling upgrade stops a node, and waits for the
// process to exit cleanly.
func stop(t *testing.T, s *server) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("send SIGTERM: %v", err)
	}
	select {
	case <-s.exited:
		if s.err != nil {
			t.Fatalf("%s exited with %v after SIGTERM:\n%s", s.nodeID, s.err, s.log())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still running 30s after SIGTERM:\n%s", s.nodeID, s.log())
	}
}

// awaitRemoved waits until via's Raft configuration no longer lists id.
func awaitRemoved(t *testing.T, via *server, id string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, id+" removed from the configuration", func() bool {
		var m struct {
			Servers []struct {
				ID string `json:"id"`
			} `json:"servers"`
		}
		via.cliJSON(0, &m, "members")
		for _, s := range m.Servers {
			if s.ID == id {
				return false
			}
		}
		return true
	})
}
