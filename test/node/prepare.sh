#!/usr/bin/env bash
# prepare.sh builds what the real node's scenarios need, the cluster's
# binaries (assets.sh), the images (images.sh) and the upgrade scenario's
# previous release's images (release-images.sh), and prints the first two
# directories, one a line: make test runs it beside the package tests
# (hack/phase.sh background), make test-cluster reads its result or runs it.
# It tells hack/phase.sh "cold" when any of the three built something.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
state=${KFN_PHASE_STATE:-}
states=$(mktemp)
trap 'rm -f "$states"' EXIT

bin=$(KFN_PHASE_STATE=$states "$root/test/node/assets.sh")
cold=$(cat "$states")
images=$(KFN_PHASE_STATE=$states "$root/test/node/images.sh" "$bin")
cold="$cold $(cat "$states")"
# The upgrade scenario's previous release (test/node/previous-release): its
# images, built here beside the package tests instead of inside the
# scenarios' serial part; the scenario finds them in the cache. After
# images.sh, whose archives are written: release-images.sh leaves buildah's
# :dev tags on the release's images.
release=$(grep -v '^#' "$root/test/node/previous-release" | head -n1)
KFN_PHASE_STATE=$states "$root/test/node/release-images.sh" "$release" "$bin" >/dev/null
cold="$cold $(cat "$states")"
if [[ -n $state ]]; then
	if [[ $cold == *cold* ]]; then echo cold >"$state"; else echo cached >"$state"; fi
fi
printf '%s\n%s\n' "$bin" "$images"
