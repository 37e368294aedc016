#!/usr/bin/env bash
# assets.sh prints the directory that holds every binary of the single-node
# cluster (test/node/singlenode), building what is missing first:
#
#   etcd, kube-apiserver          hack/envtest-assets.sh (the envtest build)
#   kubelet, kube-controller-manager, kube-scheduler, kube-proxy
#                                 k8s.io/kubernetes, the version of hack/envtest/go.mod
#   coredns                       test/node/tools/coredns/go.mod
#   kube-network-policies         test/node/tools/kube-network-policies/go.mod
#                                 (the node's NetworkPolicy enforcer)
#   keda, keda-adapter, keda-config/
#                                 e2e/keda/go.mod (operator, metrics API server, and
#                                 KEDA's own manifests from its module): the module
#                                 whose tests run KEDA's controllers in-process, built
#                                 with the flags make test compiles it with, so that
#                                 the node's KEDA compiles only what those tests did not
#   nats-server, pause            kfn's go.mod (nats-server), test/node/pause
#
# The directory is ${KFN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kfn}/cluster/bin-<versions>
# and is built once per set of versions (about 10 minutes on 2 cores on top
# of envtest's build). A directory that lacks some binaries (one made
# before a component was added) gains only those: each is built and moved
# in on its own, so a cluster that runs from the directory keeps running.
# kube-network-policies' version is not part of the name, so that adding
# it rebuilt nothing else; it is in the directory's VERSIONS file. Only the
# directory goes to stdout; progress to stderr.
#
# It also checks the Debian packages the node needs (singlenode.Packages):
# as root it installs the missing ones with apt-get; otherwise it stops and
# says which to install.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
log() { printf 'cluster-assets: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
# phase_state tells hack/phase.sh whether this call built anything.
phase_state() { if [[ -n ${KFN_PHASE_STATE:-} ]]; then printf '%s\n' "$1" >"$KFN_PHASE_STATE"; fi; }

# The node's programs that come from Debian (keep equal to
# singlenode.Packages), and one file of each to check for.
declare -A package_file=(
	[containerd]=/usr/bin/containerd
	[runc]=/usr/sbin/runc
	[containernetworking-plugins]=/usr/lib/cni/bridge
	[iptables]=/usr/sbin/iptables
	[conntrack]=/usr/sbin/conntrack
	[iproute2]=/usr/sbin/ip
)
missing=()
for p in "${!package_file[@]}"; do
	[[ -e ${package_file[$p]} ]] || missing+=("$p")
done
if ((${#missing[@]})); then
	if [[ $(id -u) -ne 0 ]]; then
		die "the single-node cluster needs the Debian packages ${missing[*]}: install them as root (apt-get install ${missing[*]}), and run it as root"
	fi
	log "installing ${missing[*]} with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2 || die "apt-get update failed"
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 || die "apt-get install ${missing[*]} failed"
fi

command -v go >/dev/null 2>&1 || die "go is not on PATH; it is needed to build the cluster's binaries"

# module_version FILE MODULE prints the version FILE's go.mod requires.
module_version() {
	awk -v m="$2" '($1 == m || ($1 == "require" && $2 == m)) { v = ($1 == "require") ? $3 : $2; if (v ~ /^v[0-9]/) { print v; exit } }' "$1"
}

envtest_dir=$("$root/hack/envtest-assets.sh")
k8s_version=$(module_version "$root/hack/envtest/go.mod" k8s.io/kubernetes)
coredns_version=$(module_version "$root/test/node/tools/coredns/go.mod" github.com/coredns/coredns)
keda_version=$(module_version "$root/e2e/keda/go.mod" github.com/kedacore/keda/v2)
netpol_version=$(module_version "$root/test/node/tools/kube-network-policies/go.mod" sigs.k8s.io/kube-network-policies)
nats_version=$(module_version "$root/go.mod" github.com/nats-io/nats-server/v2)
for v in k8s_version coredns_version keda_version netpol_version nats_version; do
	[[ -n ${!v} ]] || die "cannot read ${v%_version}'s version from its go.mod"
done
# The pause program is kfn's own; its hash is part of the name.
pause_hash=$(sha256sum "$root/test/node/pause/main.go" | cut -c1-8)

cache_root=${KFN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kfn}
name="bin-${k8s_version}-coredns${coredns_version}-keda${keda_version}-nats${nats_version}-pause${pause_hash}"
parent="$cache_root/cluster"
dir="$parent/$name"
binaries=(etcd kube-apiserver kubelet kube-controller-manager kube-scheduler kube-proxy coredns keda keda-adapter kube-network-policies nats-server pause)

# versions is the content of the directory's VERSIONS file.
versions() {
	printf 'kubernetes %s\ncoredns %s\nkeda %s\nkube-network-policies %s\nnats-server %s\n' \
		"$k8s_version" "$coredns_version" "$keda_version" "$netpol_version" "$nats_version"
}

complete() {
	local b
	for b in "${binaries[@]}"; do [[ -x $dir/$b ]] || return 1; done
	[[ -d $dir/keda-config/crd/bases ]] && [[ $(cat "$dir/VERSIONS" 2>/dev/null) == "$(versions)" ]]
}

# want NAME... reports whether the directory lacks any of NAME (to build).
want() {
	local b
	for b in "$@"; do [[ -e $dir/$b ]] || return 0; done
	return 1
}

if complete; then
	phase_state cached
	printf '%s\n' "$dir"
	exit 0
fi

mkdir -p "$parent" || die "cannot create $parent (set KFN_CACHE_DIR to another directory)"
if command -v flock >/dev/null 2>&1; then
	exec 9>"$parent/.$name.lock"
	if ! flock -n 9; then
		log "waiting for another build of $name to finish"
		flock 9
	fi
fi
if complete; then
	phase_state cached
	printf '%s\n' "$dir"
	exit 0
fi
rm -rf "$parent/.$name.tmp."*
tmp=$(mktemp -d "$parent/.$name.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP
chmod 755 "$tmp"

if [[ -d $dir ]]; then
	log "adding the missing binaries to $dir"
else
	log "building the cluster's binaries into $dir (once per version, about 10 minutes on 2 cores)"
fi
start=$SECONDS

# build DIR OUT PKG... builds the packages of the module in DIR into OUT.
build() {
	local mod=$1 out=$2
	shift 2
	(
		cd "$mod"
		env -u GOOS -u GOARCH GOWORK=off CGO_ENABLED=0 \
			go build -mod=readonly -trimpath -ldflags "${LDFLAGS:-"-s -w"}" -o "$out" "$@"
	) >&2
}

if want etcd kube-apiserver; then
	cp "$envtest_dir/etcd" "$envtest_dir/kube-apiserver" "$tmp/"
fi

if want kubelet kube-controller-manager kube-scheduler kube-proxy; then
	# shellcheck source=hack/k8s-ldflags.sh
	. "$root/hack/k8s-ldflags.sh"
	log "kubelet, kube-controller-manager, kube-scheduler, kube-proxy $k8s_version"
	LDFLAGS=$(k8s_ldflags "$k8s_version") build "$root/hack/envtest" "$tmp/" \
		k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy ||
		die "go build of the Kubernetes node binaries failed (see above)"
fi

if want coredns; then
	log "coredns $coredns_version"
	LDFLAGS="-s -w -X github.com/coredns/coredns/coremain.GitCommit=$coredns_version" \
		build "$root/test/node/tools/coredns" "$tmp/coredns" . ||
		die "go build of CoreDNS failed (see above)"
fi

if want keda keda-adapter keda-config; then
	log "keda $keda_version (operator, metrics API server)"
	# From e2e/keda's module, with the flags make test vets and tests it
	# with (CGO_ENABLED=0, -trimpath: the Makefile's): of the operator's and
	# the adapter's 3,700 packages, the 3,300 those tests compiled are taken
	# from the build cache instead of being compiled again.
	LDFLAGS="-s -w -X github.com/kedacore/keda/v2/version.Version=$keda_version" \
		build "$root/e2e/keda" "$tmp/" github.com/kedacore/keda/v2/cmd/operator github.com/kedacore/keda/v2/cmd/adapter ||
		die "go build of KEDA failed (see above)"
	mv "$tmp/operator" "$tmp/keda"
	mv "$tmp/adapter" "$tmp/keda-adapter"
	keda_src=$(cd "$root/e2e/keda" && GOWORK=off go list -mod=readonly -m -f '{{.Dir}}' github.com/kedacore/keda/v2) ||
		die "cannot find KEDA's module directory"
	cp -r "$keda_src/config" "$tmp/keda-config"
	chmod -R u+w "$tmp/keda-config"
fi

# Its version is not in the name: a directory with another version's
# binary gets this one.
if want kube-network-policies || ! grep -qx "kube-network-policies $netpol_version" "$dir/VERSIONS" 2>/dev/null; then
	log "kube-network-policies $netpol_version"
	build "$root/test/node/tools/kube-network-policies" "$tmp/kube-network-policies" \
		sigs.k8s.io/kube-network-policies/cmd/kube-network-policies/standard ||
		die "go build of kube-network-policies failed (see above)"
fi

if want nats-server; then
	log "nats-server $nats_version"
	build "$root" "$tmp/nats-server" github.com/nats-io/nats-server/v2 || die "go build of nats-server failed (see above)"
fi
if want pause; then
	build "$root" "$tmp/pause" ./test/node/pause || die "go build of pause failed (see above)"
fi

versions >"$tmp/VERSIONS"
if [[ -d $dir ]]; then
	# Each new file is renamed into place; the rest stays as it is.
	for f in "$tmp"/*; do
		target=$dir/$(basename "$f")
		if [[ -d $f ]]; then rm -rf "$target"; fi
		mv -T "$f" "$target"
	done
	rm -rf "$tmp"
else
	mv "$tmp" "$dir"
fi
trap - EXIT
log "built in $((SECONDS - start))s"
phase_state cold
printf '%s\n' "$dir"
