// Package certgen makes what a secured idemnode cluster needs: the cluster
// CA (--peer-ca) and a separate client CA (--tls-client-ca), node
// certificates, client certificates that name a tenant, and a gossip key.
// `idemnode tls` and `idemnode keygen` are its command line.
//
// Everything goes into one directory under the names docs/SECURITY.md
// uses, keys with mode 0600, and nothing is replaced unless Dir.Force. A
// certificate a node would refuse is refused instead of written: the files
// are staged in the directory and checked by the node's own rules (node
// certificates by tlsconfig.LoadNode, the check a node runs at start; the
// two CAs by tlsconfig.CheckSeparateCAs; client certificates by the tenant
// mapping of --auth-cert-tenant) before they take their names.
package certgen

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"time"
)

// Names of the files in a Dir. A node's certificate and key are
// <name>.crt and <name>.key; a client's client-<tenant>.crt and .key.
const (
	ClusterCACert = "cluster-ca.crt"
	ClusterCAKey  = "cluster-ca.key"
	ClientCACert  = "client-ca.crt"
	ClientCAKey   = "client-ca.key"
	GossipKeyFile = "gossip.keys"
)

// Default validity periods: a CA outlives the certificates it signs, which
// are renewed yearly (the node re-reads renewed files without a restart).
const (
	DefaultCAValidity   = 5 * 365 * 24 * time.Hour
	DefaultCertValidity = 365 * 24 * time.Hour
)

// backdate starts every certificate's validity a little in the past, so
// that a node whose clock is behind the issuer's accepts it at once.
const backdate = 5 * time.Minute

var (
	// ErrExists is a file that would be written and exists, without Force.
	ErrExists = errors.New("already exists")
	// ErrInvalid is a request that cannot make a usable certificate: a
	// bad name or address, a validity the CA does not cover.
	ErrInvalid = errors.New("invalid request")
	// ErrRefused is a certificate a node would refuse: wrong usages, a
	// CA that does not sign it, the cluster CA and client CA mixed.
	ErrRefused = errors.New("a node would refuse it")
)

// Kind is a CA's role.
type Kind string

// The two CAs. They must stay apart: whatever the cluster CA signs may
// speak Raft, so it signs nodes only, and clients get a CA of their own.
const (
	ClusterCA Kind = "cluster"
	ClientCA  Kind = "client"
)

// ParseKind reads a CA kind; "peer" is the cluster CA, after --peer-ca.
func ParseKind(s string) (Kind, error) {
	switch s {
	case "cluster", "peer":
		return ClusterCA, nil
	case "client":
		return ClientCA, nil
	}
	return "", fmt.Errorf("%w: CA kind %q: want cluster (the CA of --peer-ca, alias peer) or client (the CA of --tls-client-ca)", ErrInvalid, s)
}

// files returns the certificate and key names of a CA of kind k.
func (k Kind) files() (cert, key string) {
	if k == ClientCA {
		return ClientCACert, ClientCAKey
	}
	return ClusterCACert, ClusterCAKey
}

// Dir is the directory the files are written to and read from.
type Dir struct {
	Path string
	// Force replaces existing files; without it an existing file is
	// ErrExists and nothing is written.
	Force bool
	// Keep makes a call whose files all exist already succeed without
	// writing anything (it returns no paths), so a job that makes the
	// files can run again, provided the existing files pass the checks a
	// new file would and are what the request asks for: the same names
	// and addresses, the same tenant, signed by the CA in use, each key
	// its certificate's and readable by its owner alone. Otherwise it is
	// ErrRefused naming the difference. Some of the files existing is
	// still ErrExists. Not with Force.
	Keep bool
	// CADir, when set, is where CreateNode and CreateClient read the CAs
	// (certificates and keys) instead of Path. They then also put the CA
	// certificates into Path (cluster-ca.crt, and client-ca.crt when the
	// CA exists), so that Path holds what a node or client needs and no
	// CA key; a copy there already must be the same certificate.
	CADir string
}

func (d Dir) path(name string) string { return filepath.Join(d.Path, name) }

// caPath is where the CA file name is read from.
func (d Dir) caPath(name string) string {
	if d.CADir != "" {
		return filepath.Join(d.CADir, name)
	}
	return d.path(name)
}

// fileBase is what a node's or client's files may be called: a name that
// is one path element in any shell and file system.
var fileBase = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// checkBase refuses a file name base that is not one plain path element
// or that would take a CA's name.
func checkBase(what, base string) error {
	if !fileBase.MatchString(base) {
		return fmt.Errorf("%w: %s %q: want 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit (it names the files)", ErrInvalid, what, base)
	}
	for _, ca := range []string{ClusterCACert, ClientCACert} {
		if base+".crt" == ca {
			return fmt.Errorf("%w: %s %q would take the name of %s", ErrInvalid, what, base, ca)
		}
	}
	return nil
}
