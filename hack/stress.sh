#!/usr/bin/env bash
# stress.sh runs tests under the race detector beside busy loops, as a
# loaded CI machine runs them: the race phase of `make test` runs beside
# the real node's image build, and a test that passes on a quiet machine
# can fail there (a lost wake-up, an order assumed, a bound too tight).
#
#   hack/stress.sh PACKAGE...     (make stress: the race phase's packages)
#
# STRESS_LOAD busy loops (default 2: as many as this machine's cores) run
# while the tests do, and stop with them, however the script ends;
# STRESS_COUNT (default 2) runs each test that many times; STRESS_RUN,
# when set, is the tests' -run. go test -json goes to standard output.
set -euo pipefail

load=${STRESS_LOAD:-2}
count=${STRESS_COUNT:-2}
if ! [[ $load =~ ^[0-9]+$ && $count =~ ^[1-9][0-9]*$ ]]; then
	echo "stress: STRESS_LOAD must be a number and STRESS_COUNT a positive one" >&2
	exit 2
fi
if [[ $# -eq 0 ]]; then
	echo "stress: name the packages to test" >&2
	exit 2
fi

pids=()
stop() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
}
trap stop EXIT
for ((i = 0; i < load; i++)); do
	(while :; do :; done) &
	pids+=($!)
done
echo "stress: $load busy loops beside go test -race -count=$count" >&2

args=(-race -json -count="$count" -timeout 60m)
if [[ -n ${STRESS_RUN:-} ]]; then
	args+=(-run "$STRESS_RUN")
fi
CGO_ENABLED=1 ${GO:-go} test "${args[@]}" "$@"
