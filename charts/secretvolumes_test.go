package charts_test

// What of each Secret reaches the servers' pods. A Secret volume without
// items mounts every key of the Secret, present and future: a client CA
// named by its CA issuer's own Secret would bring the CA's private key
// (tls.key) into every pod, and whoever takes one pod could then mint a
// client certificate for any tenant. So every Secret volume projects
// exactly the keys the servers' flags read, in every mode of the chart.

import (
	"path"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// secretSource resolves the file a flag of the servers reads to the Secret
// volume and key it comes from, through the container's mounts and the
// pod's volumes, and checks the mount is read-only, the Secret's files 0400
// and the volume projects that key alone rather than the whole Secret.
func (m *manifests) secretSource(t *testing.T, flag string) (corev1.Volume, string) {
	t.Helper()
	c := m.container(t)
	file, ok := hasArg(c, flag+"=")
	if !ok {
		t.Fatalf("no %s flag: %q", flag, c.Args)
	}
	dir, base := path.Split(file)
	i := slices.IndexFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.MountPath+"/" == dir })
	if i < 0 {
		t.Fatalf("%s=%s: nothing is mounted at %s", flag, file, dir)
	}
	mount := c.VolumeMounts[i]
	if !mount.ReadOnly || mount.SubPath != "" {
		t.Errorf("%s: mount %+v, want read-only without subPath (Secret updates must reach the file)", flag, mount)
	}
	vols := m.sts.Spec.Template.Spec.Volumes
	j := slices.IndexFunc(vols, func(v corev1.Volume) bool { return v.Name == mount.Name })
	if j < 0 || vols[j].Secret == nil {
		t.Fatalf("%s: volume %s is not a Secret", flag, mount.Name)
	}
	s := vols[j].Secret
	if s.DefaultMode == nil || *s.DefaultMode != 0o400 {
		t.Errorf("%s: Secret %s defaultMode %v, want 0400", flag, s.SecretName, s.DefaultMode)
	}
	if len(s.Items) == 0 {
		t.Errorf("%s=%s: volume %s mounts Secret %s whole: every key in it reaches the pods, not only %s", flag, file, mount.Name, s.SecretName, base)
		return vols[j], base
	}
	k := slices.IndexFunc(s.Items, func(it corev1.KeyToPath) bool { return it.Path == base })
	if k < 0 {
		t.Fatalf("%s=%s: Secret %s projects %+v, not %s", flag, file, s.SecretName, s.Items, base)
	}
	return vols[j], s.Items[k].Key
}

// secretFile is secretSource's Secret name and key.
func (m *manifests) secretFile(t *testing.T, flag string) (secret, key string) {
	t.Helper()
	v, key := m.secretSource(t, flag)
	return v.Secret.SecretName, key
}

// secretReads maps each Secret volume of the pod to the keys the servers'
// flags read from it: every --flag=/file argument whose directory is a
// Secret volume's mount.
func (m *manifests) secretReads(t *testing.T) map[string][]string {
	t.Helper()
	c := m.container(t)
	secretMounts := map[string]bool{}
	for _, vm := range c.VolumeMounts {
		if slices.ContainsFunc(m.sts.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name && v.Secret != nil }) {
			secretMounts[vm.MountPath+"/"] = true
		}
	}
	reads := map[string][]string{}
	for _, a := range c.Args {
		flag, file, ok := strings.Cut(a, "=")
		if !ok || !secretMounts[path.Dir(file)+"/"] {
			continue
		}
		v, key := m.secretSource(t, flag)
		if !slices.Contains(reads[v.Name], key) {
			reads[v.Name] = append(reads[v.Name], key)
		}
	}
	return reads
}

// projectedKeys are the keys of its Secret a volume puts in the pod, sorted;
// nil for a volume that mounts the whole Secret.
func projectedKeys(v corev1.Volume) []string {
	var keys []string
	for _, it := range v.Secret.Items {
		keys = append(keys, it.Key)
	}
	slices.Sort(keys)
	return keys
}

// TestClientCAPrivateKeyStaysOut: a client CA named by the Secret its CA
// issuer signs with (the way docs/OPERATIONS.md tells users to name it
// with tls.certManager.clientIssuerRef) puts the CA certificate alone in the
// pods, never the Secret's tls.key. The same for an existing client CA
// Secret that holds more than the certificate.
func TestClientCAPrivateKeyStaysOut(t *testing.T) {
	for name, tc := range map[string]struct {
		set         []string
		secret, key string
	}{
		"named client issuer": {certManagerOn("tls.certManager.clientIssuerRef.name=corp-clients", "tls.certManager.clientIssuerRef.kind=ClusterIssuer",
			"tls.clientCA.secretName=corp-clients-ca", "tls.clientCA.key=tls.crt"), "corp-clients-ca", "tls.crt"},
		"chart's client CA": {certManagerOn(), fullname + "-client-ca", "tls.crt"},
		"existing Secret":   {append(tlsOn(), "tls.clientCA.enabled=true", "tls.clientCA.secretName=idem-clients"), "idem-clients", "ca.crt"},
	} {
		t.Run(name, func(t *testing.T) {
			m := render(t, tc.set...)
			found := false
			for _, v := range m.sts.Spec.Template.Spec.Volumes {
				if v.Secret == nil || v.Secret.SecretName != tc.secret {
					continue
				}
				found = true
				if keys := projectedKeys(v); !slices.Equal(keys, []string{tc.key}) {
					if keys == nil {
						keys = []string{"every key, tls.key included"}
					}
					t.Errorf("volume %s puts %q of client CA Secret %s in the pods, want %s alone: the CA's private key would let whoever takes a pod mint client certificates for any tenant",
						v.Name, keys, tc.secret, tc.key)
				}
			}
			if !found {
				t.Fatalf("no volume of Secret %s: %+v", tc.secret, m.sts.Spec.Template.Spec.Volumes)
			}
			if secret, key := m.secretFile(t, "--tls-client-ca"); secret != tc.secret || key != tc.key {
				t.Errorf("--tls-client-ca reads %s/%s, want %s/%s", secret, key, tc.secret, tc.key)
			}
		})
	}
}

// TestSecretVolumesProjectWhatFlagsRead: in every mode, each Secret volume
// of the pod projects exactly the keys the servers' flags read from it, and
// no Secret volume is mounted that no flag reads.
func TestSecretVolumesProjectWhatFlagsRead(t *testing.T) {
	existing := append(tlsOn(), "tls.clientCA.enabled=true", "tls.clientCA.secretName=idem-clients",
		"auth.enabled=true", "auth.tokensSecret=idem-tokens")
	for name, tc := range map[string]struct {
		set     []string
		volumes int
	}{
		"plaintext":        {nil, 0},
		"existing":         {existing, 4},
		"existing no mTLS": {tlsOn(), 2},
		"existing, own key names": {append(slices.Clone(existing), "tls.certKey=server.pem", "tls.keyKey=server-key.pem", "tls.caKey=cluster-ca.pem",
			"tls.clientCA.key=clients.pem", "gossipEncryption.secretKey=keys.json", "auth.tokensKey=tokens.txt"), 4},
		// One PEM file with the certificate and its key, read by both flags.
		"existing, one PEM": {append(slices.Clone(existing), "tls.certKey=server.pem", "tls.keyKey=server.pem"), 4},
		"cert-manager":      {certManagerOn("tls.certManager.proxyClient.enabled=true", "tls.certManager.proxyClient.tenant=payments", "auth.enabled=true", "auth.tokensSecret=idem-tokens"), 4},
		"cert-manager, named issuers": {certManagerOn("tls.certManager.issuerRef.name=corp-idemnode", "tls.certManager.clientIssuerRef.name=corp-clients",
			"tls.clientCA.secretName=corp-clients-ca", "tls.clientCA.key=tls.crt"), 3},
		"cert-manager, named cluster issuer": {certManagerOn("tls.certManager.issuerRef.name=corp-idemnode"), 3},
		"cert-manager no mTLS": {[]string{"tls.enabled=true", "tls.certManager.enabled=true", "gossipEncryption.enabled=true",
			"gossipEncryption.secretName=idem-gossip"}, 2},
	} {
		t.Run(name, func(t *testing.T) {
			m := render(t, tc.set...)
			reads := m.secretReads(t)
			volumes := 0
			for _, v := range m.sts.Spec.Template.Spec.Volumes {
				if v.Secret == nil {
					continue
				}
				volumes++
				want := slices.Sorted(slices.Values(reads[v.Name]))
				if len(want) == 0 {
					t.Errorf("volume %s mounts Secret %s, which no flag reads", v.Name, v.Secret.SecretName)
					continue
				}
				if got := projectedKeys(v); !slices.Equal(got, want) {
					t.Errorf("volume %s projects keys %q of Secret %s, want exactly %q, which the flags read", v.Name, got, v.Secret.SecretName, want)
				}
				var paths []string
				for _, it := range v.Secret.Items {
					paths = append(paths, it.Path)
				}
				if slices.Sort(paths); len(slices.Compact(paths)) != len(v.Secret.Items) {
					t.Errorf("volume %s projects two keys to one path: %+v", v.Name, v.Secret.Items)
				}
			}
			if volumes != tc.volumes {
				t.Errorf("%d Secret volumes, want %d: %+v", volumes, tc.volumes, m.sts.Spec.Template.Spec.Volumes)
			}
		})
	}
}
