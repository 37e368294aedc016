#!/usr/bin/env bash
# phase.sh times the phases of make test and prints them as a table, so that
# a run says where its time went:
#
#   hack/phase.sh start                   forget the phases of an earlier run
#   hack/phase.sh run NAME CMD [ARG...]   run CMD as phase NAME and record it
#   hack/phase.sh background NAME CMD...  start phase NAME in the background
#                                         (its output kept in bin/NAME.*)
#   hack/phase.sh await NAME              wait for a background phase, print
#                                         its output, end with its status (3
#                                         when none was started)
#   hack/phase.sh report                  print the table (phase, seconds,
#                                         cached or cold, the share of both
#                                         cores used) and the run's wall time
#
# CMD may write "cached" or "cold" to the file $KFN_PHASE_STATE (testsummary
# -state does, and the asset scripts do: cached when there was nothing to
# build); a phase that says nothing shows "-". A phase that fails prints the
# table so far (on stderr) and fails with CMD's status. CMD's standard output
# is phase.sh's: `dir=$(hack/phase.sh run NAME script)` works. A background
# phase is marked "beside" in the table: its seconds overlap the phases run
# meanwhile, so the total is the wall time since start, not the sum. The
# table is kept in ${KFN_PHASES:-bin/phases.tsv}.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
table=${KFN_PHASES:-$root/bin/phases.tsv}
dir=$(dirname "$table")

# busy prints the CPU time spent by the whole machine so far, in ticks
# (user, nice, system, irq, softirq, steal: not idle or iowait).
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
ticks=$(getconf CLK_TCK)
cores=$(nproc)

report() {
	[[ -s $table ]] || return 0
	local began wall
	began=$(cat "$table.start" 2>/dev/null || date +%s)
	wall=$(($(date +%s) - began))
	awk -F '\t' -v cores="$cores" -v wall="$wall" '
		BEGIN { printf "\n%-22s %8s  %-7s %5s  %s\n", "phase", "seconds", "state", "cpu", "result" }
		{ printf "%-22s %8d  %-7s %4d%%  %s\n", $1, $2, $3, $4, $5 }
		END { printf "%-22s %8d  (%d min, the wall time since the first phase; cpu: share of %d cores busy, the whole machine)\n", "total", wall, (wall + 30) / 60, cores }
	' "$table"
}

# record NAME CMD... runs CMD as phase NAME and appends its row.
record() {
	local name=$1 state_file start cpu0 status seconds cpu state result
	shift
	state_file=$(mktemp)
	start=$(date +%s)
	cpu0=$(busy)
	KFN_PHASE_STATE=$state_file "$@"
	status=$?
	seconds=$(($(date +%s) - start))
	cpu=$((seconds > 0 ? ($(busy) - cpu0) * 100 / (ticks * cores * seconds) : 0))
	((cpu <= 100)) || cpu=100
	state=$(head -n1 "$state_file" 2>/dev/null)
	rm -f "$state_file"
	result=ok
	((status == 0)) || result="failed ($status)"
	printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$seconds" "${state:--}" "$cpu" "$result" >>"$table"
	return "$status"
}

case ${1:-} in
start)
	mkdir -p "$dir"
	: >"$table"
	date +%s >"$table.start"
	rm -f "$dir"/*.phase-pid "$dir"/*.phase-status "$dir"/*.phase-out "$dir"/*.phase-log
	;;
run)
	[[ $# -ge 3 ]] || { echo "usage: phase.sh run NAME CMD [ARG...]" >&2; exit 2; }
	name=$2
	shift 2
	mkdir -p "$dir"
	[[ -e $table.start ]] || date +%s >"$table.start"
	record "$name" "$@"
	status=$?
	if ((status != 0)); then
		report >&2
		exit "$status"
	fi
	;;
background)
	[[ $# -ge 3 ]] || { echo "usage: phase.sh background NAME CMD [ARG...]" >&2; exit 2; }
	name=$2
	shift 2
	mkdir -p "$dir"
	[[ -e $table.start ]] || date +%s >"$table.start"
	base="$dir/$name"
	rm -f "$base.phase-status"
	(
		record "$name (beside)" "$@" >"$base.phase-out" 2>"$base.phase-log" </dev/null
		echo $? >"$base.phase-status.tmp"
		mv "$base.phase-status.tmp" "$base.phase-status"
	) &
	echo $! >"$base.phase-pid"
	echo "phase $name runs in the background (its output: $base.phase-log)" >&2
	;;
await)
	[[ $# -eq 2 ]] || { echo "usage: phase.sh await NAME" >&2; exit 2; }
	base="$dir/$2"
	[[ -e $base.phase-pid ]] || exit 3
	until [[ -e $base.phase-status ]]; do
		if ! kill -0 "$(cat "$base.phase-pid")" 2>/dev/null && [[ ! -e $base.phase-status ]]; then
			echo "phase $2 ended without a status" >&2
			exit 1
		fi
		sleep 2
	done
	cat "$base.phase-log" >&2
	cat "$base.phase-out"
	status=$(cat "$base.phase-status")
	rm -f "$base.phase-pid"
	if ((status != 0)); then
		report >&2
	fi
	exit "$status"
	;;
report)
	report
	;;
*)
	echo "usage: phase.sh start | run NAME CMD [ARG...] | background NAME CMD [ARG...] | await NAME | report" >&2
	exit 2
	;;
esac
