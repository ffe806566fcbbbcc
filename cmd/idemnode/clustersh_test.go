package main

import (
	"crypto/sha256"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemnode/idemnode/internal/testaddr"
)

// TestClusterScriptSecure: `scripts/cluster.sh up --secure` makes the CAs,
// certificates and gossip key and runs three nodes with mutual TLS,
// encrypted gossip and --auth; its env file alone points the CLI at the
// cluster as tenant acme, whose claim wins, and the Python example's demo
// runs through the JSON API; a plaintext client, one without
// a certificate and one with a certificate of another CA are refused. A
// second `up` reuses the files and the data. The cluster runs on a block of
// loopback addresses of this test's own (IDEMNODE_CLUSTER_NET).
func TestClusterScriptSecure(t *testing.T) {
	t.Parallel()
	needBinary(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// A space in the directory: the env file must still source.
	dir := filepath.Join(t.TempDir(), "cluster dir")
	pki := filepath.Join(dir, "pki")
	addrs := testaddr.New(t)
	base := withoutIdemnodeEnv(os.Environ())
	scriptEnv := append(base[:len(base):len(base)], "IDEMNODE_CLUSTER_DIR="+dir, "IDEMNODE_CLUSTER_NET="+addrs.Prefix())
	script := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(root, "scripts", "cluster.sh"), args...)
		cmd.Dir, cmd.Env = root, scriptEnv
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if out, err := script("down"); err != nil {
			t.Errorf("cluster.sh down: %v\n%s", err, out)
		}
		if t.Failed() {
			for _, n := range []string{"node1", "node2", "node3"} {
				b, _ := os.ReadFile(filepath.Join(dir, n, "log"))
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				t.Logf("%s log, last lines:\n%s", n, strings.Join(lines[max(0, len(lines)-30):], "\n"))
			}
		}
	})
	up := func() {
		t.Helper()
		out, err := script("up", "--secure")
		if err != nil || !strings.Contains(out, "source "+strings.ReplaceAll(filepath.Join(dir, "env"), " ", `\ `)) {
			t.Fatalf("cluster.sh up --secure: %v\n%s", err, out)
		}
	}
	up()

	// What `source idemnode-cluster/env` gives a shell, and nothing else.
	acme := append(base[:len(base):len(base)], readEnvFile(t, filepath.Join(dir, "env"))...)
	claim := func(env []string, args ...string) (claimJSON, string, int) {
		t.Helper()
		stdout, stderr, code := cliEnv(t, env, "", append([]string{"claim", "--fingerprint", "01", "--timeout", "10s", "-o", "json"}, args...)...)
		var c claimJSON
		_ = json.Unmarshal([]byte(stdout), &c)
		return c, stdout + stderr, code
	}
	if c, out, code := claim(acme, "--key", "secure-1", "--owner", "me"); code != exitOK || c.Outcome != "won" {
		t.Fatalf("claim as acme with the env file: exit %d, %s; want won", code, out)
	}
	if _, out, code := claim(acme, "--key", "secure-1", "--tenant", "other"); code != exitDenied || !strings.Contains(out, "TENANT_MISMATCH") {
		t.Errorf("acme naming tenant other: exit %d, %s; want exit 6, TENANT_MISMATCH (--auth)", code, out)
	}
	// The Python example reads the same file's IDEMNODE_JSON_URL and
	// IDEMNODE_TLS_*: its demo claims, completes and replays as acme.
	if _, err := exec.LookPath("python3"); err != nil {
		t.Log("python3 not found: the Python example's run is left out")
	} else {
		demo := exec.Command("python3", filepath.Join(root, "examples", "python", "demo.py"))
		demo.Env = acme
		if out, err := demo.CombinedOutput(); err != nil || !strings.Contains(string(out), "PASS") {
			t.Errorf("examples/python/demo.py with the env file: %v\n%s", err, out)
		}
	}
	node1 := addrs.Addr(11, 7400)
	for _, tc := range []struct {
		name   string
		args   []string
		reason string
	}{
		{"plaintext", []string{"--addr", node1}, "CONNECTION_LOST"},
		{"no client certificate", []string{"--addr", node1, "--tls-ca", filepath.Join(pki, "cluster-ca.crt")}, "CLIENT_CERT_REQUIRED"},
		{"another CA's acme", append([]string{"--addr", node1, "--tls-ca", filepath.Join(pki, "cluster-ca.crt")}, strangerCert(t)...), "CLIENT_CERT_REFUSED"},
	} {
		if _, out, code := claim(base, append(tc.args, "--key", "secure-2")...); code == exitOK || !strings.Contains(out, tc.reason) {
			t.Errorf("%s: exit %d, %s; want a refusal, %s", tc.name, code, out, tc.reason)
		}
	}
	pid, err := os.ReadFile(filepath.Join(dir, "node1", "pid"))
	if err != nil {
		t.Fatal(err)
	}
	cmdline, err := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--gossip-key-file", "--peer-ca", "--tls-client-ca", "--auth", "--auth-delegate"} {
		if !strings.Contains(string(cmdline)+"\x00", "\x00"+flag+"\x00") {
			t.Errorf("node1 runs without %s: %q", flag, cmdline)
		}
	}

	// The next `up` reuses every file of pki/ and the data dirs.
	before := dirDigests(t, pki)
	if out, err := script("down"); err != nil {
		t.Fatalf("cluster.sh down: %v\n%s", err, out)
	}
	up()
	if after := dirDigests(t, pki); !maps.Equal(before, after) {
		t.Errorf("a second up changed pki/: before %v, after %v", before, after)
	}
	if c, out, code := claim(acme, "--key", "secure-1", "--owner", "someone-else"); code != exitHeld || c.Outcome != "in_progress" {
		t.Errorf("claim of secure-1 after the second up: exit %d, %s; want in_progress (the record kept)", code, out)
	}

	// On other addresses the node certificates name the wrong IPs: `up`
	// stops before starting a node, with idemnode's message.
	if out, err := script("down"); err != nil {
		t.Fatalf("cluster.sh down: %v\n%s", err, out)
	}
	elsewhere := testaddr.New(t)
	scriptEnv = append(scriptEnv, "IDEMNODE_CLUSTER_NET="+elsewhere.Prefix())
	if out, err := script("up", "--secure"); err == nil || !strings.Contains(out, "names IP:"+addrs.IP(11)+", not the requested IP:"+elsewhere.IP(11)) ||
		!strings.Contains(out, "remove the ones named") {
		t.Errorf("up --secure on other addresses with the old certificates: %v\n%s; want a refusal naming both addresses", err, out)
	}
	if after := dirDigests(t, pki); !maps.Equal(before, after) {
		t.Errorf("the refused up changed pki/: before %v, after %v", before, after)
	}
}

// TestClusterScriptRelativeDir: a relative IDEMNODE_CLUSTER_DIR is the
// caller's directory's, made absolute (the env file names it from anywhere).
func TestClusterScriptRelativeDir(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	caller := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "scripts", "cluster.sh"), "status")
	cmd.Dir, cmd.Env = caller, append(withoutIdemnodeEnv(os.Environ()), "IDEMNODE_CLUSTER_DIR=rel")
	out, err := cmd.CombinedOutput()
	if want := "no cluster under " + filepath.Join(caller, "rel"); err != nil || strings.TrimSpace(string(out)) != want {
		t.Errorf("cluster.sh status with IDEMNODE_CLUSTER_DIR=rel: %v, %q; want %q", err, out, want)
	}
}

// strangerCert makes a client certificate for tenant acme under CAs of its
// own, and returns the flags that present it.
func strangerCert(t *testing.T) []string {
	other := t.TempDir()
	mustCerts(t, other, "tls", "ca", "--kind", "cluster")
	mustCerts(t, other, "tls", "ca", "--kind", "client")
	mustCerts(t, other, "tls", "client", "--tenant", "acme")
	return []string{"--tls-cert", filepath.Join(other, "client-acme.crt"), "--tls-key", filepath.Join(other, "client-acme.key")}
}

// withoutIdemnodeEnv drops the IDEMNODE_* variables of env, so the test's
// own environment cannot configure the commands it runs.
func withoutIdemnodeEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, envPrefix) {
			out = append(out, kv)
		}
	}
	return out
}

// readEnvFile returns the IDEMNODE_* variables, as NAME=VALUE, that a
// bash gets by sourcing the file.
func readEnvFile(t *testing.T, path string) []string {
	t.Helper()
	out, err := exec.Command("env", "-i", "bash", "-c", `source "$1" && env -0`, "bash", path).Output()
	if err != nil {
		t.Fatalf("source %s: %v", path, err)
	}
	var vars []string
	for _, kv := range strings.Split(string(out), "\x00") {
		if strings.HasPrefix(kv, envPrefix) {
			vars = append(vars, kv)
		}
	}
	if len(vars) == 0 {
		t.Fatalf("sourcing %s exports nothing", path)
	}
	return vars
}

// dirDigests maps each file of dir to the SHA-256 of its content.
func dirDigests(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][32]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = sha256.Sum256(b)
	}
	return out
}
