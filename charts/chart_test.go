// Package charts_test renders the Helm chart in charts/idemnode with `helm
// template` and checks the manifests as Kubernetes would read them: every
// document is decoded strictly into its k8s.io/api type (an unknown or
// misspelt field is an error), then the properties the chart promises are
// asserted. It needs the helm binary: on PATH or in $(go env GOPATH)/bin
// (scripts/helm-check.sh installs it there); without it the test skips.
package charts_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func TestDefaultRender(t *testing.T) {
	m := render(t)
	sts, spec := m.sts, m.sts.Spec.Template.Spec
	c := m.container(t)

	if *sts.Spec.Replicas != 3 {
		t.Errorf("replicas = %d, want 3", *sts.Spec.Replicas)
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy = %q, want Parallel", sts.Spec.PodManagementPolicy)
	}
	if sts.Spec.ServiceName != headless {
		t.Errorf("serviceName = %q, want the headless Service %q", sts.Spec.ServiceName, headless)
	}
	if !selects(t, sts.Spec.Selector, m.podLabels()) {
		t.Errorf("StatefulSet selector %v does not select its pods %v", sts.Spec.Selector, m.podLabels())
	}

	// Bootstrap and discovery.
	env := m.configMap.Data
	if env["IDEMNODE_BOOTSTRAP_EXPECT"] != "3" {
		t.Errorf("IDEMNODE_BOOTSTRAP_EXPECT = %q, want 3", env["IDEMNODE_BOOTSTRAP_EXPECT"])
	}
	if got, want := env["IDEMNODE_JOIN"], joinAddrs(3); got != want {
		t.Errorf("IDEMNODE_JOIN = %q\nwant %q", got, want)
	}
	if env["IDEMNODE_DATA_DIR"] != "/data" || env["IDEMNODE_HTTP_ADDR"] != "0.0.0.0:7403" || env["IDEMNODE_API_ADDR"] != "0.0.0.0:7404" {
		t.Errorf("data dir / http addr / api addr: %v", env)
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || c.EnvFrom[0].ConfigMapRef.Name != m.configMap.Name {
		t.Errorf("container does not take its IDEMNODE_* settings from ConfigMap %s: %+v", m.configMap.Name, c.EnvFrom)
	}
	if c.Args[0] != "serve" {
		t.Errorf("args start with %q, want serve", c.Args[0])
	}
	for prefix, want := range map[string]string{
		"--node-id=":          "$(POD_NAME)",
		"--grpc-advertise=":   fmt.Sprintf("$(POD_NAME).%s.%s.svc.cluster.local:7400", headless, ns),
		"--raft-advertise=":   "$(POD_IP):7401",
		"--gossip-advertise=": "$(POD_IP):7402",
	} {
		if got, ok := hasArg(c, prefix); !ok || got != want {
			t.Errorf("arg %s%s, want %s", prefix, got, want)
		}
	}
	for _, prefix := range []string{"--tls-", "--peer-", "--gossip-key"} {
		if a, ok := hasArg(c, prefix); ok {
			t.Errorf("TLS is off but the args carry %s%s", prefix, a)
		}
	}
	// Plaintext only when asked: TLS off is passed as --insecure.
	if !slices.Contains(c.Args, "--insecure") {
		t.Errorf("TLS is off but the args lack --insecure (the server would refuse to start): %v", c.Args)
	}
	envNames := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			envNames[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if envNames["POD_NAME"] != "metadata.name" || envNames["POD_IP"] != "status.podIP" {
		t.Errorf("POD_NAME / POD_IP not from the downward API: %v", envNames)
	}
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		t.Error("enableServiceLinks must be false: service links would inject IDEMNODE_* variables")
	}

	// Placement: zone spread and one server per host.
	if len(spec.TopologySpreadConstraints) != 1 {
		t.Fatalf("topologySpreadConstraints: %+v", spec.TopologySpreadConstraints)
	}
	tsc := spec.TopologySpreadConstraints[0]
	if tsc.TopologyKey != "topology.kubernetes.io/zone" || tsc.MaxSkew != 1 || tsc.WhenUnsatisfiable != corev1.DoNotSchedule {
		t.Errorf("zone spread = %s maxSkew %d %s, want topology.kubernetes.io/zone maxSkew 1 DoNotSchedule",
			tsc.TopologyKey, tsc.MaxSkew, tsc.WhenUnsatisfiable)
	}
	if !selects(t, tsc.LabelSelector, m.podLabels()) {
		t.Error("zone spread's labelSelector does not select the pods")
	}
	if spec.Affinity == nil || spec.Affinity.PodAntiAffinity == nil {
		t.Fatal("no podAntiAffinity")
	}
	req := spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if len(req) != 1 || req[0].TopologyKey != "kubernetes.io/hostname" || !selects(t, req[0].LabelSelector, m.podLabels()) {
		t.Errorf("want one required hostname anti-affinity term selecting the pods, got %+v", req)
	}

	// Probes: readiness on /readyz, a startup probe, no liveness.
	httpPort := containerPort(t, c, "http")
	if httpPort != 7403 {
		t.Errorf("container port http = %d, want 7403", httpPort)
	}
	rp := c.ReadinessProbe
	if rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Path != "/readyz" || rp.HTTPGet.Port.String() != "http" {
		t.Errorf("readinessProbe = %+v, want GET /readyz on port http", rp)
	}
	sp := c.StartupProbe
	if sp == nil || sp.HTTPGet == nil || sp.HTTPGet.Path != "/healthz" || sp.FailureThreshold*sp.PeriodSeconds < 60 {
		t.Errorf("startupProbe = %+v, want GET /healthz allowing at least 60 s", sp)
	}
	if c.LivenessProbe != nil {
		t.Errorf("livenessProbe is on by default: %+v", c.LivenessProbe)
	}

	// Shutdown: preStop, then SIGTERM's leadership transfer, leave and drain.
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Fatal("no preStop sleep")
	}
	grace, pre := *spec.TerminationGracePeriodSeconds, c.Lifecycle.PreStop.Sleep.Seconds
	if grace < pre+15 {
		t.Errorf("terminationGracePeriodSeconds %d < preStop %d + 15 s of shutdown", grace, pre)
	}

	// Security.
	psc, sc := spec.SecurityContext, c.SecurityContext
	if psc == nil || sc == nil {
		t.Fatal("missing securityContext")
	}
	if !isTrue(psc.RunAsNonRoot) || !isTrue(sc.RunAsNonRoot) {
		t.Error("runAsNonRoot must be true")
	}
	if psc.RunAsUser == nil || *psc.RunAsUser == 0 || psc.FSGroup == nil {
		t.Error("pod must run as a non-zero UID with an fsGroup (data volume and 0400 secrets)")
	}
	if !isTrue(sc.ReadOnlyRootFilesystem) {
		t.Error("readOnlyRootFilesystem must be true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation must be false")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("capabilities = %+v, want drop [ALL] and nothing added", sc.Capabilities)
	}
	for name, s := range map[string]*corev1.SeccompProfile{"pod": psc.SeccompProfile, "container": sc.SeccompProfile} {
		if s == nil || s.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s seccompProfile = %+v, want RuntimeDefault", name, s)
		}
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the pods must not mount a service account token")
	}
	if m.sa == nil || spec.ServiceAccountName != m.sa.Name {
		t.Error("pods do not use the chart's ServiceAccount")
	}

	// Data: one claim per pod mounted at /data.
	if len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.VolumeClaimTemplates[0].Name != "data" {
		t.Fatalf("volumeClaimTemplates: %+v", sts.Spec.VolumeClaimTemplates)
	}
	pvc := sts.Spec.VolumeClaimTemplates[0].Spec
	if got := pvc.Resources.Requests[corev1.ResourceStorage]; got.String() != "10Gi" {
		t.Errorf("claim size %s, want 10Gi", got.String())
	}
	if pvc.StorageClassName != nil {
		t.Errorf("storageClassName = %q, want unset (cluster default)", *pvc.StorageClassName)
	}
	if !mountedAt(c, "data", "/data") {
		t.Error("data is not mounted at /data")
	}
	if len(spec.Volumes) != 0 {
		t.Errorf("no pod volumes expected with TLS off and persistence on: %+v", spec.Volumes)
	}

	// Config changes roll the pods.
	sum := sts.Spec.Template.Annotations["checksum/config"]
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(sum) {
		t.Errorf("checksum/config = %q", sum)
	}
	if other := render(t, "log.level=debug").sts.Spec.Template.Annotations["checksum/config"]; other == sum {
		t.Error("checksum/config did not change with the configuration")
	}

	// Services.
	h := m.services[headless]
	if h == nil {
		t.Fatalf("no headless Service %s: %v", headless, m.services)
	}
	if h.Spec.ClusterIP != corev1.ClusterIPNone || !h.Spec.PublishNotReadyAddresses {
		t.Errorf("headless Service: clusterIP %q publishNotReadyAddresses %v", h.Spec.ClusterIP, h.Spec.PublishNotReadyAddresses)
	}
	wantPorts := map[string]string{"grpc/TCP": "grpc", "raft/TCP": "raft", "gossip-tcp/TCP": "gossip-tcp", "gossip-udp/UDP": "gossip-udp",
		"api/TCP": "api"}
	for _, p := range h.Spec.Ports {
		key := p.Name + "/" + string(p.Protocol)
		if tp, ok := wantPorts[key]; ok {
			if p.TargetPort.String() != tp {
				t.Errorf("headless port %s targets %s", key, p.TargetPort.String())
			}
			containerPort(t, c, tp)
			delete(wantPorts, key)
		}
	}
	if len(wantPorts) != 0 {
		t.Errorf("headless Service lacks ports %v", wantPorts)
	}
	if !selects(t, &metav1.LabelSelector{MatchLabels: h.Spec.Selector}, m.podLabels()) {
		t.Error("headless Service does not select the pods")
	}
	cl := m.services[fullname]
	if cl == nil {
		t.Fatalf("no client Service %s", fullname)
	}
	if cl.Spec.Type != corev1.ServiceTypeClusterIP || cl.Spec.ClusterIP == corev1.ClusterIPNone || cl.Spec.PublishNotReadyAddresses {
		t.Errorf("client Service must be a ClusterIP routing to ready pods: %+v", cl.Spec)
	}
	if len(cl.Spec.Ports) != 2 || cl.Spec.Ports[0].Port != 7400 || cl.Spec.Ports[0].TargetPort.String() != "grpc" ||
		cl.Spec.Ports[1].Port != 7404 || cl.Spec.Ports[1].TargetPort.String() != "api" {
		t.Errorf("client Service ports: %+v, want grpc 7400 and the JSON API 7404", cl.Spec.Ports)
	}
	if p := containerPort(t, c, "api"); p != 7404 {
		t.Errorf("container port api = %d, want 7404", p)
	}
	if !selects(t, &metav1.LabelSelector{MatchLabels: cl.Spec.Selector}, m.podLabels()) {
		t.Error("client Service does not select the pods")
	}

	// Disruption budget.
	if m.pdb == nil || m.pdb.Spec.MaxUnavailable == nil || m.pdb.Spec.MaxUnavailable.IntValue() != 1 || m.pdb.Spec.MinAvailable != nil {
		t.Errorf("PDB = %+v, want maxUnavailable 1", m.pdb)
	} else if !selects(t, m.pdb.Spec.Selector, m.podLabels()) {
		t.Error("PDB does not select the pods")
	}
	if m.monitor != nil {
		t.Error("ServiceMonitor rendered while off by default")
	}
}

func TestReplicaCounts(t *testing.T) {
	for _, tc := range []struct {
		replicas, pdbMax int
	}{{1, 0}, {3, 1}, {5, 1}} {
		t.Run(fmt.Sprint(tc.replicas), func(t *testing.T) {
			m := render(t, fmt.Sprintf("replicas=%d", tc.replicas))
			if int(*m.sts.Spec.Replicas) != tc.replicas {
				t.Errorf("replicas = %d", *m.sts.Spec.Replicas)
			}
			if got := m.configMap.Data["IDEMNODE_BOOTSTRAP_EXPECT"]; got != fmt.Sprint(tc.replicas) {
				t.Errorf("bootstrap-expect = %q, want %d", got, tc.replicas)
			}
			join, ok := m.configMap.Data["IDEMNODE_JOIN"]
			if tc.replicas == 1 && ok {
				t.Errorf("a single server must not --join (it would never bootstrap): %q", join)
			}
			if tc.replicas > 1 && join != joinAddrs(tc.replicas) {
				t.Errorf("IDEMNODE_JOIN = %q, want %q", join, joinAddrs(tc.replicas))
			}
			if got := m.pdb.Spec.MaxUnavailable.IntValue(); got != tc.pdbMax {
				t.Errorf("PDB maxUnavailable = %d, want %d", got, tc.pdbMax)
			}
			// An explicit bootstrapExpect equal to the count is fine.
			if _, err := helmTemplate(t, fmt.Sprintf("replicas=%d", tc.replicas), fmt.Sprintf("bootstrapExpect=%d", tc.replicas)); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestTLSAndGossipKeySecrets(t *testing.T) {
	m := render(t, "tls.enabled=true", "tls.secretName=idem-tls", "tls.clientCA.enabled=true", "tls.clientCA.secretName=idem-clients",
		"gossipEncryption.enabled=true", "gossipEncryption.secretName=idem-gossip")
	c, spec := m.container(t), m.sts.Spec.Template.Spec
	for _, want := range []struct{ volume, secret, mount string }{
		{"tls", "idem-tls", "/etc/idemnode/tls"},
		{"client-ca", "idem-clients", "/etc/idemnode/client-ca"},
		{"gossip-key", "idem-gossip", "/etc/idemnode/gossip"},
	} {
		i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == want.volume })
		if i < 0 {
			t.Errorf("no volume %s", want.volume)
			continue
		}
		s := spec.Volumes[i].Secret
		if s == nil || s.SecretName != want.secret {
			t.Errorf("volume %s is not Secret %s: %+v", want.volume, want.secret, spec.Volumes[i])
			continue
		}
		if s.DefaultMode == nil {
			t.Errorf("Secret %s has no defaultMode, want 0400", want.secret)
		} else if *s.DefaultMode != 0o400 {
			t.Errorf("Secret %s defaultMode = %#o, want 0400", want.secret, *s.DefaultMode)
		}
		if !mountedAt(c, want.volume, want.mount) || !mountReadOnly(c, want.volume) {
			t.Errorf("Secret %s not mounted read-only at %s", want.secret, want.mount)
		}
	}
	for prefix, want := range map[string]string{
		"--tls-cert=":        "/etc/idemnode/tls/tls.crt",
		"--tls-key=":         "/etc/idemnode/tls/tls.key",
		"--peer-ca=":         "/etc/idemnode/tls/ca.crt",
		"--tls-client-ca=":   "/etc/idemnode/client-ca/ca.crt",
		"--gossip-key-file=": "/etc/idemnode/gossip/gossip.key",
	} {
		if got, ok := hasArg(c, prefix); !ok || got != want {
			t.Errorf("arg %s%s, want %s", prefix, got, want)
		}
	}
	if slices.Contains(c.Args, "--insecure") {
		t.Errorf("TLS is on but the args carry --insecure: %v", c.Args)
	}
	// TLS without client certificates.
	m = render(t, "tls.enabled=true", "tls.secretName=idem-tls", "gossipEncryption.enabled=true", "gossipEncryption.secretName=idem-gossip")
	c = m.container(t)
	if a, ok := hasArg(c, "--tls-client-ca"); ok {
		t.Errorf("client CA rendered while off: %s", a)
	}
	if slices.ContainsFunc(m.sts.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "client-ca" }) {
		t.Error("client CA volume rendered while off")
	}
	if got, ok := hasArg(c, "--peer-ca="); !ok || got != "/etc/idemnode/tls/ca.crt" {
		t.Errorf("--peer-ca=%s, want the cluster CA of the TLS Secret", got)
	}
}

func TestOptionalParts(t *testing.T) {
	c := render(t, "livenessProbe.enabled=true").container(t)
	if lp := c.LivenessProbe; lp == nil || lp.HTTPGet == nil || lp.HTTPGet.Path != "/healthz" {
		t.Errorf("livenessProbe enabled = %+v, want GET /healthz", lp)
	}

	m := render(t, "serviceMonitor.enabled=true", "serviceMonitor.labels.release=prom")
	sm := m.monitor
	if sm == nil {
		t.Fatal("no ServiceMonitor")
	}
	if sm.Labels["release"] != "prom" || len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor: %+v", sm)
	}
	if r := sm.Spec.Endpoints[0].Relabelings; len(r) != 1 || r[0].TargetLabel != "job" || r[0].Replacement != "idemnode" {
		t.Errorf("ServiceMonitor relabelings %+v, want job=idemnode (the alert rules and dashboard select it)", r)
	}
	h := m.services[headless]
	if !selects(t, &sm.Spec.Selector, h.Labels) || selects(t, &sm.Spec.Selector, m.services[fullname].Labels) {
		t.Error("ServiceMonitor must select the headless Service (every pod, ready or not) and only it")
	}
	if !slices.ContainsFunc(h.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == sm.Spec.Endpoints[0].Port }) {
		t.Errorf("headless Service has no port %q to scrape", sm.Spec.Endpoints[0].Port)
	}

	pvc := render(t, "persistence.storageClassName=zonal-wffc").sts.Spec.VolumeClaimTemplates[0].Spec
	if pvc.StorageClassName == nil || *pvc.StorageClassName != "zonal-wffc" {
		t.Errorf("storageClassName = %v", pvc.StorageClassName)
	}
	m = render(t, "persistence.enabled=false")
	if len(m.sts.Spec.VolumeClaimTemplates) != 0 ||
		!slices.ContainsFunc(m.sts.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "data" && v.EmptyDir != nil }) {
		t.Error("persistence off: want an emptyDir data volume and no claims")
	}

	m = render(t, "topologySpread.whenUnsatisfiable=ScheduleAnyway", "podAntiAffinity.type=preferred",
		"config.dead-server-cleanup=10m", "config.snapshot-threshold=16384")
	spec := m.sts.Spec.Template.Spec
	if spec.TopologySpreadConstraints[0].WhenUnsatisfiable != corev1.ScheduleAnyway ||
		len(spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
		len(spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 0 {
		t.Errorf("soft placement not rendered: %+v %+v", spec.TopologySpreadConstraints, spec.Affinity)
	}
	if m.configMap.Data["IDEMNODE_DEAD_SERVER_CLEANUP"] != "10m" || m.configMap.Data["IDEMNODE_SNAPSHOT_THRESHOLD"] != "16384" {
		t.Errorf("config flags not in the ConfigMap: %v", m.configMap.Data)
	}
}

// TestRefusedConfigurations: the render fails, with a message that says why.
func TestRefusedConfigurations(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"replicas=2"}, "replicas must be odd"},
		{[]string{"replicas=4"}, "replicas must be odd"},
		// values.schema.json refuses these before the templates run.
		{[]string{"replicas=0"}, "at '/replicas': minimum"},
		{[]string{"replicaCount=3"}, "additional properties 'replicaCount' not allowed"},
		{[]string{"log.format=xml"}, "at '/log/format'"},
		{[]string{"tls.enabeld=true"}, "additional properties 'enabeld' not allowed"},
		{[]string{"bootstrapExpect=1"}, "lower than replicas"},
		{[]string{"replicas=5", "bootstrapExpect=3"}, "lower than replicas"},
		{[]string{"bootstrapExpect=5"}, "higher than replicas"},
		{[]string{"tls.enabled=true"}, "tls.secretName is empty"},
		{[]string{"tls.enabled=true", "tls.secretName=s", "tls.certKey="}, "tls.certKey or tls.keyKey is empty"},
		{[]string{"tls.secretName=s"}, "tls.enabled is false"},
		{[]string{"tls.clientCA.enabled=true"}, "client certificates need TLS"},
		{[]string{"tls.enabled=true", "tls.secretName=s", "tls.caKey="}, "tls.caKey is empty"},
		{[]string{"tls.enabled=true", "tls.secretName=s", "tls.clientCA.enabled=true"}, "tls.clientCA.secretName is empty"},
		{[]string{"tls.enabled=true", "tls.secretName=s", "tls.clientCA.enabled=true", "tls.clientCA.secretName=c", "tls.clientCA.key="}, "tls.clientCA.key is empty"},
		{[]string{"tls.clientCA.secretName=c"}, "tls.clientCA.enabled is false"},
		{[]string{"tls.enabled=true", "tls.secretName=s"}, "gossipEncryption.enabled is false: gossip would stay plaintext"},
		{[]string{"gossipEncryption.enabled=true", "gossipEncryption.secretName=g"}, "tls.enabled is false: Raft and the API would stay plaintext"},
		{[]string{"gossipEncryption.enabled=true"}, "gossipEncryption.secretName is empty"},
		{[]string{"gossipEncryption.secretName=g"}, "gossipEncryption.enabled is false"},
		{[]string{"podAntiAffinity.type=sometimes"}, "podAntiAffinity.type must be"},
		{[]string{"terminationGracePeriodSeconds=10"}, "terminationGracePeriodSeconds"},
		{[]string{"config.join=x:7402"}, "config.join is set by the chart"},
		{[]string{"config.insecure=true"}, "config.insecure is set by the chart"},
		{[]string{"config.gossip-key=abc"}, "config.gossip-key is set by the chart"},
		{[]string{"config.auth-tokens-file=/x"}, "config.auth-tokens-file is set by the chart"},
		{[]string{"config.tenant-max-keys=10"}, "config.tenant-max-keys is set by the chart"},
		// Half-configured authentication.
		{[]string{"auth.enabled=true"}, "auth.enabled is true but no credential could authenticate a call"},
		{append(tlsOn(), "auth.enabled=true"), "no credential could authenticate a call"},
		{append(tlsOn(), "tls.clientCA.enabled=true", "tls.clientCA.secretName=c", "auth.enabled=true", "auth.certTenant=none"),
			"no credential could authenticate a call"},
		{[]string{"auth.enabled=true", "auth.tokensSecret=t", "auth.tokensKey="}, "auth.tokensKey is empty"},
		{[]string{"auth.enabled=true", "auth.tokensSecret=t", "auth.peers={idemnode-peer}"}, "tls.clientCA.enabled is false"},
		{[]string{"auth.tokensSecret=t"}, "auth.tokensSecret is set but auth.enabled is false"},
		{[]string{"auth.certTenant=cn"}, "auth.certTenant is set but auth.enabled is false"},
		{[]string{"auth.admins={ops}"}, "auth.admins is set but auth.enabled is false"},
		{[]string{"auth.peers={n}"}, "auth.peers is set but auth.enabled is false"},
		{[]string{"auth.delegates={proxy}"}, "auth.delegates is set but auth.enabled is false"},
		{[]string{"auth.enabled=true", "auth.tokensSecret=t", "auth.certTenant=subject"}, "at '/auth/certTenant'"},
		// TLS from cert-manager, and its contradictions with existing Secrets.
		{[]string{"tls.certManager.enabled=true"}, "tls.certManager.enabled is true but tls.enabled is false"},
		{certManagerOn("tls.secretName=idem-tls"), "clear tls.secretName, or turn tls.certManager off"},
		{certManagerOn("tls.clientCA.secretName=c"), "the chart makes the client CA itself"},
		{certManagerOn("tls.certKey=cert.pem"), "cert-manager writes tls.crt, tls.key and ca.crt"},
		{certManagerOn("tls.certManager.clientIssuerRef.name=clients"), "name the Secret holding it in tls.clientCA.secretName"},
		{[]string{"tls.enabled=true", "tls.certManager.enabled=true", "tls.certManager.clientIssuerRef.name=clients"}, "tls.clientCA.enabled is false"},
		{certManagerOn("tls.certManager.issuerRef.name=ca", "tls.certManager.clientIssuerRef.name=ca", "tls.clientCA.secretName=c"),
			"the servers refuse a client CA that is the cluster CA"},
		{certManagerOn("tls.certManager.proxyClient.enabled=true"), "proxyClient.tenant is empty"},
		{[]string{"tls.enabled=true", "tls.certManager.enabled=true", "tls.certManager.proxyClient.enabled=true", "tls.certManager.proxyClient.tenant=p"},
			"the servers ask for no client certificate"},
		{[]string{"tls.certManager.issuerRef.name=ca"}, "tls.certManager.issuerRef.name is set but tls.certManager.enabled is false"},
		{certManagerOn("tls.certManager.issuerRef.kind=Vault"), "at '/tls/certManager/issuerRef/kind'"},
		{certManagerOn("tls.certManager.duration=90d"), "at '/tls/certManager/duration'"},
		{certManagerOn("tls.certManager.privateKey.size=256"), "at '/tls/certManager/privateKey'"},
		{certManagerOn("tls.certManager.extraDnsNames={Bad_Name}"), "at '/tls/certManager/extraDnsNames/0'"},
		{certManagerOn("tls.certManager.extraIpAddresses={10.0.0.300}"), "at '/tls/certManager/extraIpAddresses/0'"},
		{[]string{"tls.certManager.extraIpAddresses={10.0.0.5}"}, "tls.certManager.extraIpAddresses is set but tls.certManager.enabled is false"},
		{[]string{"limits.tenantClaimBurst=10"}, "a burst needs a rate"},
		{[]string{"limits.tenantMaxKeys=-1"}, "at '/limits/tenantMaxKeys': minimum"},
		{[]string{"limits.tenantClaimRate=fast"}, "at '/limits/tenantClaimRate'"},
	} {
		out, err := helmTemplate(t, tc.set...)
		if err == nil {
			t.Errorf("%v rendered, want a failure mentioning %q:\n%.300s", tc.set, tc.want, out)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v failed without mentioning %q: %v", tc.set, tc.want, err)
		}
	}
}

// tlsOn are the --set pairs of a TLS cluster without client certificates.
func tlsOn() []string {
	return []string{"tls.enabled=true", "tls.secretName=idem-tls", "gossipEncryption.enabled=true", "gossipEncryption.secretName=idem-gossip"}
}

// authArgs returns the container's authentication and tenant-limit flags.
func authArgs(c corev1.Container) []string {
	var out []string
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--auth") || strings.HasPrefix(a, "--tenant-") {
			out = append(out, a)
		}
	}
	return out
}

// TestAuthAndLimits: auth.* and limits.* become serve's flags, and the
// tokens Secret is mounted read-only, 0400, as a directory (a subPath mount
// would never see the Secret's updates, and the server re-reads the file
// when it changes).
func TestAuthAndLimits(t *testing.T) {
	if got := authArgs(render(t).container(t)); len(got) != 0 {
		t.Errorf("default render carries %v; auth and limits are off by default", got)
	}

	set := append(tlsOn(), "tls.clientCA.enabled=true", "tls.clientCA.secretName=idem-clients",
		"auth.enabled=true", "auth.tokensSecret=idem-tokens", "auth.tokensKey=tokens.txt", "auth.certTenant=san-dns-suffix:.tenants.example",
		"auth.admins={ops,sre}", "auth.peers={idemnode-peer}", "auth.delegates={payments-proxy}",
		"limits.tenantClaimRate=0.5", "limits.tenantClaimBurst=20", "limits.tenantMaxKeys=1000", "limits.tenantMaxBytes=10737418240")
	m := render(t, set...)
	c, spec := m.container(t), m.sts.Spec.Template.Spec
	want := []string{"--auth", "--auth-tokens-file=/etc/idemnode/auth/tokens.txt", "--auth-cert-tenant=san-dns-suffix:.tenants.example",
		"--auth-admin=ops", "--auth-admin=sre", "--auth-peer=idemnode-peer", "--auth-delegate=payments-proxy",
		"--tenant-claim-rate=0.5", "--tenant-claim-burst=20", "--tenant-max-bytes=10737418240", "--tenant-max-keys=1000"}
	if got := authArgs(c); !slices.Equal(got, want) {
		t.Errorf("auth and limit flags:\n got %q\nwant %q", got, want)
	}
	i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "auth-tokens" })
	if i < 0 || spec.Volumes[i].Secret == nil || spec.Volumes[i].Secret.SecretName != "idem-tokens" {
		t.Fatalf("no volume auth-tokens of Secret idem-tokens: %+v", spec.Volumes)
	}
	if mode := spec.Volumes[i].Secret.DefaultMode; mode == nil || *mode != 0o400 {
		t.Errorf("tokens Secret defaultMode = %v, want 0400", mode)
	}
	j := slices.IndexFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.Name == "auth-tokens" })
	if j < 0 || c.VolumeMounts[j].MountPath != "/etc/idemnode/auth" || !c.VolumeMounts[j].ReadOnly || c.VolumeMounts[j].SubPath != "" {
		t.Errorf("tokens Secret mount: %+v, want read-only /etc/idemnode/auth without subPath", c.VolumeMounts)
	}

	// Client certificates alone: no tokens file, no tokens volume.
	m = render(t, append(tlsOn(), "tls.clientCA.enabled=true", "tls.clientCA.secretName=idem-clients", "auth.enabled=true")...)
	if got := authArgs(m.container(t)); !slices.Equal(got, []string{"--auth"}) {
		t.Errorf("certificate-only auth renders %q, want --auth alone (the server's default mapping)", got)
	}
	if slices.ContainsFunc(m.sts.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "auth-tokens" }) {
		t.Error("tokens volume rendered without auth.tokensSecret")
	}

	// Numbers from a values file arrive as float64: still whole numbers on
	// the command line, and limits work without auth.
	c = render(t, `--set-json=limits={"tenantClaimRate":100,"tenantMaxKeys":1000000,"tenantMaxBytes":10737418240}`).container(t)
	want = []string{"--tenant-claim-rate=100", "--tenant-max-bytes=10737418240", "--tenant-max-keys=1000000"}
	if got := authArgs(c); !slices.Equal(got, want) {
		t.Errorf("limits from float64 values:\n got %q\nwant %q", got, want)
	}
}

// sidecarSpec is what the proxy sidecar's ConfigMap offers to copy into a
// pod spec; decoding is strict against the Kubernetes types.
type sidecarSpec struct {
	Containers []corev1.Container `json:"containers"`
	Volumes    []corev1.Volume    `json:"volumes"`
}

// TestProxySidecar: the chart renders a container spec for `idemnode proxy`
// that reaches this release's client Service, probes the proxy's own port,
// runs as the servers do (non-root, read-only), and with TLS and a token
// mounts the CA and the token it names on its command line.
func TestProxySidecar(t *testing.T) {
	spec := func(m *manifests) (sidecarSpec, corev1.Container) {
		t.Helper()
		if m.sidecar == nil {
			t.Fatal("no proxy sidecar ConfigMap")
		}
		var s sidecarSpec
		js, err := yaml.YAMLToJSONStrict([]byte(m.sidecar.Data["sidecar.yaml"]))
		if err != nil {
			t.Fatalf("sidecar.yaml: %v", err)
		}
		strictDecode(t, js, &s)
		if len(s.Containers) != 1 {
			t.Fatalf("containers: %+v", s.Containers)
		}
		return s, s.Containers[0]
	}
	s, c := spec(render(t))
	wantArgs := []string{"proxy", "--listen=0.0.0.0:8000", "--upstream=http://127.0.0.1:8080",
		"--cluster=" + fullname + "." + ns + ".svc.cluster.local:7400", "--http-addr=0.0.0.0:8001"}
	if !slices.Equal(c.Args, wantArgs) || len(s.Volumes) != 0 || len(c.VolumeMounts) != 0 {
		t.Errorf("default sidecar: args %q volumes %v mounts %v\nwant args %q", c.Args, s.Volumes, c.VolumeMounts, wantArgs)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.String() != "proxy-http" {
		t.Errorf("readiness probe %+v, want GET /readyz on proxy-http", p)
	}
	sc := c.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("security context %+v, want non-root and read-only", sc)
	}
	if !strings.HasPrefix(c.Image, "idemnode:") {
		t.Errorf("image %q, want the chart's", c.Image)
	}

	s, c = spec(render(t, append(tlsOn(), "auth.enabled=true", "auth.tokensSecret=t", "auth.delegates={proxy}",
		"proxySidecar.tenantHeader=X-Tenant", "proxySidecar.tokenSecret=proxy-token", "proxySidecar.upstreamPort=9000")...))
	for _, want := range []string{"--upstream=http://127.0.0.1:9000", "--tenant-header=X-Tenant",
		"--tls-ca=/etc/idemnode-proxy/tls/ca.crt", "--auth-token-file=/etc/idemnode-proxy/auth/token"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %s", c.Args, want)
		}
	}
	mounted := map[string]string{}
	for _, vm := range c.VolumeMounts {
		mounted[vm.Name] = vm.MountPath
	}
	for _, v := range s.Volumes {
		if v.Secret == nil || mounted[v.Name] == "" || *v.Secret.DefaultMode != 0o400 {
			t.Errorf("volume %+v: want a 0400 Secret mounted in the container", v)
		}
	}
	if len(s.Volumes) != 2 || s.Volumes[0].Secret.SecretName != "idemnode-proxy-ca" || s.Volumes[1].Secret.SecretName != "proxy-token" {
		t.Errorf("volumes %+v, want the CA-only Secret and the token Secret (never the servers' TLS Secret)", s.Volumes)
	}
	for _, v := range s.Volumes {
		if v.Secret.SecretName == "idem-tls" {
			t.Errorf("the sidecar mounts the servers' TLS Secret, whose key is their peer credential: %+v", v)
		}
	}
	s, c = spec(render(t, append(tlsOn(), "tls.clientCA.enabled=true", "tls.clientCA.secretName=idem-clients",
		"proxySidecar.clientCertSecret=app-proxy-client")...))
	if !slices.Contains(c.Args, "--tls-cert=/etc/idemnode-proxy/client/tls.crt") || !slices.Contains(c.Args, "--tls-key=/etc/idemnode-proxy/client/tls.key") ||
		len(s.Volumes) != 2 || s.Volumes[1].Secret.SecretName != "app-proxy-client" {
		t.Errorf("with client certificates: args %q volumes %+v, want the client certificate mounted and named", c.Args, s.Volumes)
	}
	if m := render(t, "proxySidecar.render=false"); m.sidecar != nil {
		t.Error("proxySidecar.render=false still renders it")
	}
}
