# Sourced by the scripts that run helm (helm-check.sh, release.sh): installs
# helm with `go install` (the only registry here is the Go module proxy; the
# build takes a few minutes once and is cached in GOBIN or
# $(go env GOPATH)/bin) and puts that directory first on PATH.
helm_module=helm.sh/helm/v3/cmd/helm
helm_version=v3.22.0

bindir=$(go env GOBIN)
if [[ -z "$bindir" ]]; then
	gopath=$(go env GOPATH)
	bindir="${gopath%%:*}/bin"
fi
# A go-installed helm reports its minor version only (e.g. v3.22).
if [[ -x "$bindir/helm" ]] && [[ "$("$bindir/helm" version --template '{{.Version}}' 2>/dev/null)" == "${helm_version%.*}"* ]]; then
	echo "helm $("$bindir/helm" version --template '{{.Version}}') cached at $bindir/helm"
else
	echo "installing helm $helm_version with go install (a few minutes, once)"
	helm_start=$SECONDS
	go install "$helm_module@$helm_version"
	echo "helm installed at $bindir/helm in $((SECONDS - helm_start))s"
fi
# The Go chart test looks on PATH first.
export PATH="$bindir:$PATH"
