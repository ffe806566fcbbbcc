package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/idemnode/idemnode/internal/certgen"
	"github.com/idemnode/idemnode/rpc"
)

// certDirFlags are what every certificate command shares: the directory
// of the files and whether existing ones may be replaced.
type certDirFlags struct {
	dir   string
	force bool
	keep  bool
}

func (f *certDirFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.dir, "dir", ".", "directory of the CAs, certificates and keys (created 0700 if missing)")
	fl.BoolVar(&f.force, "force", false, "replace files that exist (without it, an existing file is an error and nothing is written)")
	fl.BoolVar(&f.keep, "keep", false, "when every file this command writes exists, keep them and succeed (a job that runs again), "+
		"if they are what this command would make (names, tenant, CA, key, key mode 0600; otherwise an error); "+
		"some of them existing is still an error")
}

// registerCADir adds --ca-dir, for the commands that sign.
func registerCADir(fl *pflag.FlagSet, caDir *string) {
	fl.StringVar(caDir, "ca-dir", "", "read the CAs (certificates and keys) from this directory instead of --dir, "+
		"and put copies of the CA certificates into --dir: a directory for a node or a client, without CA keys")
}

func (f *certDirFlags) certDir() certgen.Dir {
	return certgen.Dir{Path: f.dir, Force: f.force, Keep: f.keep}
}

// certCmdError sorts a certgen failure: a refusal of the request (an
// existing file, bad input, a certificate a node would refuse) is a usage
// error, exit 2; anything else (a disk that fails) a runtime one, exit 1.
func certCmdError(err error) error {
	if errors.Is(err, certgen.ErrExists) || errors.Is(err, certgen.ErrInvalid) || errors.Is(err, certgen.ErrRefused) {
		return err
	}
	return runtimeError{err}
}

// printWritten lists the files a command wrote, one per line (none: --keep
// kept them).
func printWritten(cmd *cobra.Command, paths []string) {
	if len(paths) == 0 {
		fmt.Fprintln(cmd.OutOrStdout(), "kept the existing files (--keep)")
	}
	for _, p := range paths {
		fmt.Fprintln(cmd.OutOrStdout(), "wrote", p)
	}
}

// validity turns a --days flag into a duration, refusing what is not a
// positive number of days.
func validity(days int) (time.Duration, error) {
	if days <= 0 {
		return 0, fmt.Errorf("--days must be positive, not %d", days)
	}
	return time.Duration(days) * 24 * time.Hour, nil
}

func newTLSCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "Make the CAs and certificates of a mutual-TLS cluster",
		Long: `Makes, in one directory (--dir), what a secured cluster needs (docs/SECURITY.md):

  cluster-ca.crt, .key       the cluster CA (serve --peer-ca): signs nodes, nothing else
  client-ca.crt, .key        the client CA (serve --tls-client-ca), a CA of its own
  <name>.crt, .key           a node's certificate (serve --tls-cert, --tls-key)
  client-<tenant>.crt, .key  a client's, naming its tenant (client --tls-cert, --tls-key)

and 'idemnode keygen' the gossip keyring, gossip.keys (serve --gossip-key-file). Keys are
written with mode 0600 and nothing is replaced without --force. A certificate a node would
refuse (the two CAs mixed, a CA that cannot vouch for serverAuth and clientAuth, no name to
dial) is refused instead of written. Keep the CA keys off the nodes: a node needs its own
pair, cluster-ca.crt, client-ca.crt and gossip.keys.`,
		Example: `  idemnode tls ca --kind cluster
  idemnode tls ca --kind client
  idemnode tls node --name node1 --ip 10.0.0.1 --dns node1.example.com
  idemnode tls client --tenant acme
  idemnode keygen`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newTLSCACmd(), newTLSNodeCmd(), newTLSClientCmd())
	return cmd
}

func newTLSCACmd() *cobra.Command {
	var dir certDirFlags
	var kind string
	var days int
	cmd := &cobra.Command{
		Use:   "ca",
		Short: "Make the cluster CA or the client CA",
		Long: `Makes a self-signed CA (ECDSA P-256) and writes its certificate and key:
cluster-ca.crt and cluster-ca.key with --kind cluster, client-ca.crt and client-ca.key with
--kind client. The cluster CA is what serve's --peer-ca trusts: any certificate it signs may
replicate Raft and vote, so it signs nodes only. Clients get certificates from the client CA
(--tls-client-ca); a node refuses to start when the client CA is the cluster CA or is signed
by it, and so does this command.`,
		Example: `  idemnode tls ca --kind cluster --dir /etc/idemnode/pki
  idemnode tls ca --kind client --dir /etc/idemnode/pki --days 3650`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if kind == "" {
				return errors.New("--kind is required: cluster or client")
			}
			k, err := certgen.ParseKind(kind)
			if err != nil {
				return err
			}
			v, err := validity(days)
			if err != nil {
				return err
			}
			written, err := dir.certDir().CreateCA(k, v)
			if err != nil {
				return certCmdError(err)
			}
			printWritten(cmd, written)
			return nil
		},
	}
	dir.register(cmd.Flags())
	cmd.Flags().StringVar(&kind, "kind", "", "which CA: cluster (the CA of --peer-ca; alias peer) or client (the CA of --tls-client-ca) (required)")
	cmd.Flags().IntVar(&days, "days", int(certgen.DefaultCAValidity/(24*time.Hour)), "days the CA is valid")
	return cmd
}

func newTLSNodeCmd() *cobra.Command {
	var dir certDirFlags
	var req certgen.NodeRequest
	var days int
	var caDir string
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Make a node's certificate, signed by the cluster CA",
		Long: `Makes a node's certificate and key, <name>.crt and <name>.key, signed by the cluster CA
of --dir (cluster-ca.crt and cluster-ca.key). One certificate serves the gRPC API and the
other nodes (serve --tls-cert and --tls-key; the peer certificate by default), so it carries
both serverAuth and clientAuth. Give every name and address clients dial the node by
(--dns, --ip; at least one): nodes check only the CA between themselves, clients check
the name. Behind the Helm chart, one certificate for all pods names
*.<fullname>-headless.<namespace>.svc.<clusterDomain> and <fullname>.<namespace>.svc.
Before it is written, the certificate is loaded as 'idemnode serve' loads it at start,
with the directory's CAs: one the node would refuse is not written.`,
		Example: `  idemnode tls node --name node1 --ip 10.0.0.1 --dns node1.example.com
  idemnode tls node --name idemnode --dns '*.idemnode-headless.idemnode.svc.cluster.local' --dns idemnode.idemnode.svc`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, err := validity(days)
			if err != nil {
				return err
			}
			if req.Name == "" {
				return errors.New("--name is required: it names the certificate and its files")
			}
			req.Validity = v
			d := dir.certDir()
			d.CADir = caDir
			written, err := d.CreateNode(req)
			if err != nil {
				return certCmdError(err)
			}
			printWritten(cmd, written)
			return nil
		},
	}
	dir.register(cmd.Flags())
	cmd.Flags().StringVar(&req.Name, "name", "", "the node's name: the certificate's common name and its files' (required)")
	cmd.Flags().StringSliceVar(&req.DNS, "dns", nil, "DNS names clients reach the node by (repeatable, comma-separated; '*.' as the first label for a wildcard)")
	cmd.Flags().StringSliceVar(&req.IPs, "ip", nil, "IP addresses clients reach the node by (repeatable, comma-separated)")
	cmd.Flags().IntVar(&days, "days", int(certgen.DefaultCertValidity/(24*time.Hour)), "days the certificate is valid (at most until the CA expires)")
	registerCADir(cmd.Flags(), &caDir)
	return cmd
}

func newTLSClientCmd() *cobra.Command {
	var dir certDirFlags
	var req certgen.ClientRequest
	var days int
	var caDir string
	cmd := &cobra.Command{
		Use:   "client",
		Short: "Make a client's certificate for a tenant, signed by the client CA",
		Long: `Makes a client certificate (clientAuth) and key, client-<tenant>.crt and .key (or --name),
signed by the client CA of --dir (client-ca.crt and client-ca.key). A node with --auth reads
the tenant from it by --auth-cert-tenant; the certificate carries the tenant where that mapping
looks, by default as the URI SAN idemnode://tenant/<tenant>; its common name is the tenant.
It is refused unless the mapping reads exactly --tenant from it and the client CA is apart
from the cluster CA in the directory.`,
		Example: `  idemnode tls client --tenant acme
  idemnode claim --addr 10.0.0.1:7400 --tls-ca cluster-ca.crt --tls-cert client-acme.crt --tls-key client-acme.key --key order-42
  idemnode tls client --tenant acme --auth-cert-tenant san-dns-suffix:.tenants.example`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, err := validity(days)
			if err != nil {
				return err
			}
			if req.Tenant == "" {
				return errors.New("--tenant is required")
			}
			req.Validity = v
			d := dir.certDir()
			d.CADir = caDir
			written, err := d.CreateClient(req)
			if err != nil {
				return certCmdError(err)
			}
			printWritten(cmd, written)
			return nil
		},
	}
	dir.register(cmd.Flags())
	cmd.Flags().StringVar(&req.Tenant, "tenant", "", "the tenant the certificate authenticates as (required)")
	cmd.Flags().StringVar(&req.Mapping, "auth-cert-tenant", rpc.DefaultCertMapping,
		"the servers' --auth-cert-tenant: san-uri-prefix:<prefix>, san-dns-suffix:.<suffix> or cn")
	cmd.Flags().StringVar(&req.Name, "name", "", "name of the files (default client-<tenant>)")
	cmd.Flags().IntVar(&days, "days", int(certgen.DefaultCertValidity/(24*time.Hour)), "days the certificate is valid (at most until the CA expires)")
	registerCADir(cmd.Flags(), &caDir)
	return cmd
}

func newKeygenCmd() *cobra.Command {
	var dir certDirFlags
	var printKey bool
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Make a gossip encryption key",
		Long: `Makes a random gossip key (32 bytes, base64) and writes it as a keyring of one key to
gossip.keys in --dir, mode 0600: serve's --gossip-key-file. Every node gets the same file.
With --print it writes no file and prints the key instead: for --gossip-key, or to append a
new key to the keyring when rotating (docs/SECURITY.md, "Gossip keys").`,
		Example: `  idemnode keygen --dir /etc/idemnode/pki
  idemnode keygen --print >> gossip.keys`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if printKey {
				key, err := certgen.NewGossipKey()
				if err != nil {
					return runtimeError{err}
				}
				fmt.Fprintln(cmd.OutOrStdout(), key)
				return nil
			}
			written, err := dir.certDir().CreateGossipKey()
			if err != nil {
				return certCmdError(err)
			}
			printWritten(cmd, written)
			return nil
		},
	}
	dir.register(cmd.Flags())
	cmd.Flags().BoolVar(&printKey, "print", false, "print the key instead of writing gossip.keys")
	return cmd
}
