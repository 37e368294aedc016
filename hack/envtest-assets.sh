#!/usr/bin/env bash
# envtest-assets.sh prints the directory that holds the kube-apiserver and etcd
# binaries for envtest, building them from their Go modules first when missing.
#
#   KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh) go test ./...
#
# The versions are the ones pinned in hack/envtest/go.mod. The binaries live
# outside the checkout, in
#   ${KFN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kfn}/envtest/<k8s-version>-etcd<etcd-version>
# and are built once (about 5 minutes on 2 cores). Only the directory is printed
# on stdout; progress goes to stderr. Concurrent callers wait for one build.
# Needs only Go (and flock, if present, to avoid building twice).
set -euo pipefail

tools_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/envtest" && pwd)

log() { printf 'envtest-assets: %s\n' "$*" >&2; }
# phase_state tells hack/phase.sh whether this call built anything.
phase_state() { if [[ -n ${KFN_PHASE_STATE:-} ]]; then printf '%s\n' "$1" >"$KFN_PHASE_STATE"; fi; }
die() { log "error: $*"; exit 1; }

# module_version prints the version that hack/envtest/go.mod requires for $1.
module_version() {
	local word mod ver
	while read -r word mod ver _; do
		[[ $word == require ]] || { ver=$mod; mod=$word; }
		if [[ $mod == "$1" && $ver == v[0-9]* ]]; then
			printf '%s\n' "$ver"
			return
		fi
	done <"$tools_dir/go.mod"
}

k8s_version=$(module_version k8s.io/kubernetes)
etcd_version=$(module_version go.etcd.io/etcd/server/v3)
[[ -n $k8s_version ]] || die "no k8s.io/kubernetes requirement in $tools_dir/go.mod"
[[ -n $etcd_version ]] || die "no go.etcd.io/etcd/server/v3 requirement in $tools_dir/go.mod"

cache_root=${KFN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kfn}
name="${k8s_version}-etcd${etcd_version}"
parent="$cache_root/envtest"
dir="$parent/$name"

complete() { [[ -x $dir/kube-apiserver && -x $dir/etcd ]]; }

if complete; then
	phase_state cached
	printf '%s\n' "$dir"
	exit 0
fi

command -v go >/dev/null 2>&1 || die "go is not on PATH; it is needed to build kube-apiserver and etcd"
mkdir -p "$parent" || die "cannot create the cache directory $parent (set KFN_CACHE_DIR to another one)"

# One builder at a time; the others wait here and then find the result.
if command -v flock >/dev/null 2>&1; then
	exec 9>"$parent/.$name.lock"
	if ! flock -n 9; then
		log "waiting for another build of $name to finish"
		flock 9
	fi
else
	log "flock not found: building without a lock (a concurrent caller may build too)"
fi

if complete; then
	phase_state cached
	printf '%s\n' "$dir"
	exit 0
fi

# Temp directories of builders that died; only the lock holder makes one.
rm -rf "$parent/.$name.tmp."*

tmp=$(mktemp -d "$parent/.$name.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP # run the EXIT trap on these too
chmod 755 "$tmp" # mktemp makes it private; the result is a plain cache directory

log "building kube-apiserver $k8s_version and etcd $etcd_version into $dir"
log "this happens once per version and takes about 5 minutes on 2 cores"
start=$SECONDS

# shellcheck source=hack/k8s-ldflags.sh
. "$(dirname "${BASH_SOURCE[0]}")/k8s-ldflags.sh"
ldflags=$(k8s_ldflags "$k8s_version")

# GOWORK=off: a go.work elsewhere must not pull this module into another
# build list. -mod=readonly: the committed go.mod and go.sum are the truth.
# Its output goes to stderr: stdout carries only the directory.
(
	cd "$tools_dir"
	env -u GOOS -u GOARCH GOWORK=off CGO_ENABLED=0 \
		go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$tmp/" \
		k8s.io/kubernetes/cmd/kube-apiserver go.etcd.io/etcd/server/v3
) >&2 || die "go build of kube-apiserver and etcd failed (see above)"

# go names the etcd main package "server" after its path without /v3.
mv "$tmp/server" "$tmp/etcd"
printf 'kube-apiserver %s\netcd %s\n' "$k8s_version" "$etcd_version" >"$tmp/VERSIONS"

# A leftover incomplete directory (someone deleted a binary) is replaced whole.
if [[ -e $dir ]]; then
	rm -rf "$dir"
fi
mv "$tmp" "$dir"
trap - EXIT

log "built in $((SECONDS - start))s"
phase_state cold
printf '%s\n' "$dir"
