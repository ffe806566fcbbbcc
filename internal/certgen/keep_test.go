package certgen

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// keptFiles reads every file of dir, to show that a refused --keep left
// them as they were.
func keptFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for _, name := range listDir(t, dir) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		m[name] = b
	}
	return m
}

// TestKeepChecksTheExistingFiles: Keep keeps only files this command would
// have written: the existing ones go through the checks a staged file goes
// through, and any difference from the request is ErrRefused that names it
// and suggests --force, with nothing written.
func TestKeepChecksTheExistingFiles(t *testing.T) {
	node1 := NodeRequest{Name: "node1", IPs: []string{"127.0.0.1"}, DNS: []string{"node1.example"}}
	acme := ClientRequest{Tenant: "acme"}
	cases := []struct {
		name string
		// spoil changes the files of a directory made by mustPKI with node1,
		// acme's client pair and a gossip key.
		spoil func(t *testing.T, d Dir)
		keep  func(d Dir) ([]string, error)
		want  string
	}{
		{"node with other names", nil,
			func(d Dir) ([]string, error) {
				return d.CreateNode(NodeRequest{Name: "node1", IPs: []string{"127.0.0.2"}, DNS: []string{"node1.example"}})
			}, "127.0.0.2"},
		{"node with a name more", nil,
			func(d Dir) ([]string, error) {
				return d.CreateNode(NodeRequest{Name: "node1", IPs: []string{"127.0.0.1"}, DNS: []string{"node1.example", "node1.other"}})
			}, "node1.other"},
		{"node with fewer names", nil,
			func(d Dir) ([]string, error) {
				return d.CreateNode(NodeRequest{Name: "node1", IPs: []string{"127.0.0.1"}})
			}, "node1.example"},
		{"node key of another certificate",
			func(t *testing.T, d Dir) { copyFile(t, d.path("client-acme.key"), d.path("node1.key")) },
			func(d Dir) ([]string, error) { return d.CreateNode(node1) }, "private key does not match"},
		{"node of another cluster CA",
			func(t *testing.T, d Dir) {
				pairOfAnotherPKI(t, d, "node1", func(o Dir) ([]string, error) { return o.CreateNode(node1) })
			},
			func(d Dir) ([]string, error) { return d.CreateNode(node1) }, "not accepted by the cluster CA"},
		{"node key readable by others",
			func(t *testing.T, d Dir) { chmod(t, d.path("node1.key"), 0o644) },
			func(d Dir) ([]string, error) { return d.CreateNode(node1) }, "mode -rw-r--r--"},
		{"client of another tenant", nil,
			func(d Dir) ([]string, error) {
				return d.CreateClient(ClientRequest{Tenant: "globex", Name: "client-acme"})
			},
			`reads tenant "acme" from it, not "globex"`},
		{"client key of another certificate",
			func(t *testing.T, d Dir) { copyFile(t, d.path("node1.key"), d.path("client-acme.key")) },
			func(d Dir) ([]string, error) { return d.CreateClient(acme) }, "private key does not match"},
		{"client of another client CA",
			func(t *testing.T, d Dir) {
				pairOfAnotherPKI(t, d, "client-acme", func(o Dir) ([]string, error) { return o.CreateClient(acme) })
			},
			func(d Dir) ([]string, error) { return d.CreateClient(acme) }, "not accepted by the client CA"},
		{"CA that is not a CA",
			func(t *testing.T, d Dir) {
				copyFile(t, d.path("node1.crt"), d.path(ClusterCACert))
				copyFile(t, d.path("node1.key"), d.path(ClusterCAKey))
			},
			func(d Dir) ([]string, error) { return d.CreateCA(ClusterCA, 0) }, "is not a CA certificate"},
		{"CA key of another CA",
			func(t *testing.T, d Dir) { copyFile(t, d.path(ClientCAKey), d.path(ClusterCAKey)) },
			func(d Dir) ([]string, error) { return d.CreateCA(ClusterCA, 0) }, "is not the key of"},
		{"gossip keyring that does not parse",
			func(t *testing.T, d Dir) { writeFile(t, d.path(GossipKeyFile), []byte("not a key\n")) },
			func(d Dir) ([]string, error) { return d.CreateGossipKey() }, GossipKeyFile},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := mustPKI(t)
			if _, err := d.CreateNode(node1); err != nil {
				t.Fatal(err)
			}
			if _, err := d.CreateClient(acme); err != nil {
				t.Fatal(err)
			}
			if _, err := d.CreateGossipKey(); err != nil {
				t.Fatal(err)
			}
			if c.spoil != nil {
				c.spoil(t, d)
			}
			before := keptFiles(t, d.Path)
			written, err := c.keep(Dir{Path: d.Path, Keep: true})
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--force") {
				t.Errorf("Keep: err %v; want ErrRefused naming %q and --force", err, c.want)
			}
			if written != nil {
				t.Errorf("Keep wrote %v", written)
			}
			if after := keptFiles(t, d.Path); !maps.EqualFunc(before, after, bytes.Equal) {
				t.Errorf("a refused Keep changed the directory: %v, before %v", slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(before)))
			}
		})
	}
}

// TestKeepWithCADir: with CADir, the kept pair must chain to CADir's CA,
// not just to the copy of a CA certificate beside it.
func TestKeepWithCADir(t *testing.T) {
	ca := mustPKI(t)
	d := Dir{Path: filepath.Join(t.TempDir(), "node"), CADir: ca.Path}
	req := NodeRequest{Name: "node1", IPs: []string{"127.0.0.1"}}
	if _, err := d.CreateNode(req); err != nil {
		t.Fatal(err)
	}
	kept := d
	kept.Keep = true
	if written, err := kept.CreateNode(req); err != nil || written != nil {
		t.Fatalf("Keep of the files just made: wrote %v, err %v", written, err)
	}
	pairOfAnotherPKI(t, d, "node1", func(o Dir) ([]string, error) { return o.CreateNode(req) })
	if _, err := kept.CreateNode(req); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "not accepted by the cluster CA") {
		t.Errorf("Keep of a node of another CA than CADir's: %v, want ErrRefused", err)
	}
}

// pairOfAnotherPKI makes base.crt and base.key with create in a PKI of
// its own and copies them over d's.
func pairOfAnotherPKI(t *testing.T, d Dir, base string, create func(Dir) ([]string, error)) {
	t.Helper()
	other := mustPKI(t)
	if _, err := create(other); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".crt", ".key"} {
		copyFile(t, other.path(base+ext), d.path(base+ext))
	}
}

func chmod(t *testing.T, path string, m os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, m); err != nil {
		t.Fatal(err)
	}
}
