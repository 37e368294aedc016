#!/usr/bin/env bash
# release-images.sh COMMIT BIN_DIR builds kfn's images (the server image and
# the runtime images) of an earlier commit of this repository, for the real
# node's upgrade scenario (e2e/cluster TestUpgradeUnderLoad), and prints the
# directory that holds them as Docker archives:
#
#   localhost/kfn/kfn:release-<commit>               that commit's ./Dockerfile
#   localhost/kfn/runtime-<runtime>:release-<commit> that commit's runtimes
#
# The images come from that commit's sources with that commit's own
# images.sh (a git archive of the commit in a temporary
# directory), on the bases and layers of this machine's image cache, and are
# tagged release-<commit> so that they never replace this checkout's :dev
# images. The result is kept per commit under
# ${KFN_CACHE_DIR:-$HOME/.cache/kfn}/cluster/images-release/<commit>: a
# second call prints it at once.
#
# The node is a shared resource: run it inside the same flock as the tests
# (flock /tmp/kfn-cluster.lock). It leaves buildah's localhost/kfn/*:dev
# tags on the commit's images; test/node/images.sh builds them again
# from this checkout on its next call.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
log() { printf 'release-images: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

commit=${1:-}
bin_dir=${2:-}
[[ -n $commit && -n $bin_dir && -f $bin_dir/VERSIONS ]] || die "usage: release-images.sh COMMIT BIN_DIR (the directory test/node/assets.sh prints)"
[[ $(id -u) -eq 0 ]] || die "building images needs root (buildah with overlay storage); run as root"
full=$(git -C "$root" rev-parse --verify --quiet "$commit^{commit}") ||
	die "commit $commit is not in this clone of the repository (a shallow clone? fetch the full history)"

cache_root=${KFN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kfn}
out="$cache_root/cluster/images-release/$full"
# Tells hack/phase.sh (through $KFN_PHASE_STATE, when set) whether it built.
phase_state() { if [[ -n ${KFN_PHASE_STATE:-} ]]; then printf '%s\n' "$1" >"$KFN_PHASE_STATE"; fi; }
if [[ -f $out/complete ]]; then
	phase_state cached
	printf '%s\n' "$out"
	exit 0
fi
phase_state cold

tag="release-${full:0:12}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log "building the images of $full from its sources (tag $tag)"
mkdir -p "$work/src" "$work/cache/cluster"
git -C "$root" archive "$full" | tar -x -C "$work/src"
# The commit's images.sh with this machine's buildah storage and downloads
# (its bases are the same), its own archives directory.
mkdir -p "$cache_root/cluster/buildah" "$cache_root/cluster/downloads"
ln -s "$cache_root/cluster/buildah" "$work/cache/cluster/buildah"
ln -s "$cache_root/cluster/downloads" "$work/cache/cluster/downloads"
# Where the commit keeps images.sh: test/node, or hack/cluster in commits
# before the real node's machinery moved to test/node.
images_sh="$work/src/test/node/images.sh"
[[ -f $images_sh ]] || images_sh="$work/src/hack/cluster/images.sh"
# The node's own images (cluster-*: pause, CoreDNS, KEDA, NATS) are made
# from BIN_DIR alike; images.sh keeps an archive newer than its binaries, so
# the ones this checkout's images.sh made are linked in instead of made and
# exported again (and are not part of the result below anyway).
mkdir -p "$work/cache/cluster/images"
for archive in "$cache_root/cluster/images"/cluster-*.tar; do
	[[ -e $archive ]] && ln "$archive" "$work/cache/cluster/images/" 2>/dev/null || true
done
KFN_CACHE_DIR="$work/cache" "$images_sh" "$bin_dir" >/dev/null ||
	die "the images.sh of $full failed"

export BUILDAH_ISOLATION=chroot
bah() { buildah --root "$cache_root/cluster/buildah" --runroot /run/kfn-cluster-buildah --storage-driver overlay "$@"; }
rm -rf "$out.tmp"
mkdir -p "$out.tmp"
for archive in "$work/cache/cluster/images"/*.tar; do
	name=$(basename "$archive" .tar)
	[[ $name == cluster-* ]] && continue # the node's own images, not the commit's
	bah tag "localhost/kfn/$name:dev" "localhost/kfn/$name:$tag"
	bah push --quiet "localhost/kfn/$name:$tag" "docker-archive:$out.tmp/$name.tar:localhost/kfn/$name:$tag" >/dev/null ||
		die "export localhost/kfn/$name:$tag failed"
done
printf '%s\n' "$tag" >"$out.tmp/tag"
touch "$out.tmp/complete"
rm -rf "$out"
mv "$out.tmp" "$out"
log "images of $full ready"
printf '%s\n' "$out"
