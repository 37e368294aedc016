#!/usr/bin/env bash
# prepare.sh builds what the real node's scenarios need, the cluster's
# binaries (assets.sh) and the images (images.sh), and prints their two
# directories, one a line: make test runs it beside the package tests
# (hack/phase.sh background), make test-cluster reads its result or runs it.
# It tells hack/phase.sh "cold" when either script built something.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
state=${KFN_PHASE_STATE:-}
states=$(mktemp)
trap 'rm -f "$states"' EXIT

bin=$(KFN_PHASE_STATE=$states "$root/test/node/assets.sh")
cold=$(cat "$states")
images=$(KFN_PHASE_STATE=$states "$root/test/node/images.sh" "$bin")
cold="$cold $(cat "$states")"
if [[ -n $state ]]; then
	if [[ $cold == *cold* ]]; then echo cold >"$state"; else echo cached >"$state"; fi
fi
printf '%s\n%s\n' "$bin" "$images"
