#!/usr/bin/env bash
# test-packages.sh installs the Debian packages the tests use when they are
# missing, so that `make test` on a fresh machine needs nothing by hand:
#
#   python3-flask   Flask for python314's host (Kyma's python314 runs
#                   handlers in Flask; PyPI cannot be reached here, Debian's
#                   package can), used with Debian's /usr/bin/python3
#   python3-requests  requests, which Kyma's Python images provide and
#                   whose requests carry the call's trace
#                   (runtimes/tracing_test.go)
#   python3-bottle, python3-cheroot  bottle on cheroot, Kyma's python312
#                   server: runtimes/bottle_test.go compares the request
#                   python312 handlers get with bottle's own
#   chromium        the headless browser of the web view tests (kfn dev's, e2e/kfndev TestWebView; kfn view's, e2e/cluster
#                   TestEventsReachPodsChainAndDeadLetter), driven with chromedp (test/browsertest)
#   fonts-dejavu-core  a font for the text of its screenshot
#
# As root with apt-get it installs what is missing (once); otherwise it
# says what is missing and leaves it to the tests, which skip (or, under
# CI=true, fail) and name the tool (test/testenv).
#
# With arguments it does the same for those packages only: `make dev` asks
# for python3-flask, which the example's python314 function (notify) runs
# in, so that the first run on a fresh machine needs nothing by hand.
set -euo pipefail

PACKAGES=(python3-flask python3-requests python3-bottle python3-cheroot chromium fonts-dejavu-core)
if (($#)); then
	PACKAGES=("$@")
fi

log() { printf 'test-packages: %s\n' "$*" >&2; }

missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
((${#missing[@]})) || exit 0
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
	log "missing ${missing[*]}: install them (apt-get install ${missing[*]}); what needs them skips (tests; or fails under CI=true) or says it is missing (kfn dev)"
	exit 0
fi
log "installing ${missing[*]} with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2 || { log "apt-get update failed"; exit 1; }
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 || { log "apt-get install ${missing[*]} failed"; exit 1; }
