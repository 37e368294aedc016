#!/usr/bin/env bash
# phase.sh times the phases of make test and prints them as a table, so that
# a run says where its time went:
#
#   hack/phase.sh start                 forget the phases of an earlier run
#   hack/phase.sh run NAME CMD [ARG...] run CMD as phase NAME and record it
#   hack/phase.sh report                print the table (phase, seconds, cached
#                                       or cold, the share of both cores used)
#
# CMD may write "cached" or "cold" to the file $KFN_PHASE_STATE (testsummary
# -state does, and the asset scripts do: cached when there was nothing to
# build); a phase that says nothing shows "-". A phase that fails prints the
# table so far (on stderr) and fails with CMD's status. CMD's standard output
# is phase.sh's: `dir=$(hack/phase.sh run NAME script)` works. The table is kept in
# ${KFN_PHASES:-bin/phases.tsv}.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
table=${KFN_PHASES:-$root/bin/phases.tsv}

# busy prints the CPU time spent by the whole machine so far, in ticks
# (user, nice, system, irq, softirq, steal: not idle or iowait).
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
ticks=$(getconf CLK_TCK)
cores=$(nproc)

report() {
	[[ -s $table ]] || return 0
	awk -F '\t' -v cores="$cores" '
		BEGIN { printf "\n%-22s %8s  %-7s %5s  %s\n", "phase", "seconds", "state", "cpu", "result" }
		{ printf "%-22s %8d  %-7s %4d%%  %s\n", $1, $2, $3, $4, $5; total += $2 }
		END { printf "%-22s %8d  (%d min; cpu: share of %d cores busy, the whole machine)\n", "total", total, (total + 30) / 60, cores }
	' "$table"
}

case ${1:-} in
start)
	mkdir -p "$(dirname "$table")"
	: >"$table"
	;;
run)
	[[ $# -ge 3 ]] || { echo "usage: phase.sh run NAME CMD [ARG...]" >&2; exit 2; }
	name=$2
	shift 2
	mkdir -p "$(dirname "$table")"
	state_file=$(mktemp)
	start=$(date +%s)
	cpu0=$(busy)
	KFN_PHASE_STATE=$state_file "$@"
	status=$?
	seconds=$(($(date +%s) - start))
	cpu=$(( seconds > 0 ? ($(busy) - cpu0) * 100 / (ticks * cores * seconds) : 0 ))
	((cpu <= 100)) || cpu=100
	state=$(head -n1 "$state_file" 2>/dev/null)
	rm -f "$state_file"
	result=ok
	((status == 0)) || result="failed ($status)"
	printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$seconds" "${state:--}" "$cpu" "$result" >>"$table"
	if ((status != 0)); then
		report >&2
		exit "$status"
	fi
	;;
report)
	report
	;;
*)
	echo "usage: phase.sh start | run NAME CMD [ARG...] | report" >&2
	exit 2
	;;
esac
