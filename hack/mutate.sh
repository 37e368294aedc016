#!/usr/bin/env bash
# mutate.sh runs gremlins (github.com/go-gremlins/gremlins), a mutation tester,
# over packages of the main module: it changes the code one small way at a
# time (a < for a <=, a + for a -, a condition negated, ...), runs the tests of
# the changed package, and reports which changes no test noticed.
#
#   hack/mutate.sh ./eventbridge/publisher ./scaler/activity   the named packages, whole
#   BASE=main hack/mutate.sh                                   the packages a change touches since BASE
#
# With BASE, a package is one with a .go file (tests included) changed since
# the merge base of BASE and the working tree (tracked files; new files once
# added with `git add -N`). In a package whose code changed, only the
# changed lines are mutated (gremlins --diff); in one where only tests
# changed, the whole package is, so that new tests are measured against
# everything they may catch.
#
# A package is its own directory: files of its subpackages are left out
# (they are packages of their own, name them too). Each mutant runs the
# tests of its package only (`go test -failfast <package>`), so a test
# in another package (scaler/server's, of scaler/activity) kills no mutant of this
# one.
#
# Environment: GREMLINS, the gremlins binary (default: gremlins on PATH);
# MUTATE_WORKERS, mutants tested at once (default 1: the tests wait on real
# servers and bound their waits, and two at once on 2 cores make them slow
# enough to fail, which would count as killed); MUTATE_TIMEOUT_COEFFICIENT,
# how many times the first (coverage) run of a package's tests a mutant's
# run may take before it counts as timed out (default 3); MUTATE_FLAGS,
# more flags for `gremlins unleash` (for example --dry-run, or
# --exclude-files REGEXP, a path relative to the package); MUTATE_FILES,
# file names (retry.go outcome.go): only these files of each package are
# mutated (gremlins itself can only leave files out), the same subset for a
# run before and after a change.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
gremlins=${GREMLINS:-gremlins}
workers=${MUTATE_WORKERS:-1}
coefficient=${MUTATE_TIMEOUT_COEFFICIENT:-3}
read -r -a extra <<<"${MUTATE_FLAGS:-}"
read -r -a only <<<"${MUTATE_FILES:-}"

# gremlins gives each mutant's tests a multiple of the time its first run
# of the package's tests took: a result from go test's cache would make
# that a second or two, and every mutant of a package with a real server
# to start would time out.
export GOFLAGS="-count=1${GOFLAGS:+ $GOFLAGS}"

log() { printf 'mutate: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# inModule succeeds when directory $1 (relative to root) belongs to the main
# module: no go.mod between it and the root.
inModule() {
	local d=$1
	while [[ $d != . && $d != / ]]; do
		[[ -f $root/$d/go.mod ]] && return 1
		d=$(dirname "$d")
	done
}

# excludeOthers prints the --exclude-files regexp of the Go files of
# directory $1 (tests aside) not named in MUTATE_FILES, or nothing when
# every file is named.
excludeOthers() {
	local f b o keep
	local -a others=()
	for f in "$root/$1"/*.go; do
		b=$(basename "$f")
		[[ -e $f && $b != *_test.go ]] || continue
		keep=
		for o in "${only[@]}"; do
			[[ $b == "$o" ]] && keep=1
		done
		[[ -n $keep ]] || others+=("${b//./\\.}")
	done
	((${#others[@]} > 0)) || return 0
	local IFS='|'
	printf '(^|/)(%s)$' "${others[*]}"
}

# hasCode succeeds when directory $1 holds Go code other than tests.
hasCode() {
	local f
	for f in "$root/$1"/*.go; do
		[[ -e $f && $f != *_test.go ]] && return 0
	done
	return 1
}

declare -a dirs=()
declare -A diffed=()
if (($# > 0)); then
	for p in "$@"; do
		d=${p#./}
		d=${d%/}
		[[ -d $root/$d ]] || die "no package directory $p"
		hasCode "$d" || die "$p has no Go code but tests"
		dirs+=("$d")
	done
else
	[[ -n ${BASE:-} ]] || die "name packages (PKGS=./eventbridge/publisher) or a base revision (BASE=main)"
	git -C "$root" rev-parse --verify --quiet "$BASE^{commit}" >/dev/null || die "BASE $BASE is not a revision"
	declare -A seen=()
	while IFS= read -r f; do
		d=$(dirname "$f")
		[[ $f == *_test.go ]] || diffed[$d]=1
		[[ -n ${seen[$d]:-} ]] && continue
		seen[$d]=1
		[[ -d $root/$d ]] && inModule "$d" && hasCode "$d" && dirs+=("$d")
	done < <(git -C "$root" diff --merge-base --name-only "$BASE" -- '*.go')
	((${#dirs[@]} > 0)) || { log "no package of the main module changed since $BASE"; exit 0; }
fi

for o in "${only[@]}"; do
	found=
	for d in "${dirs[@]}"; do
		[[ -f $root/$d/$o ]] && found=1
	done
	[[ -n $found ]] || die "MUTATE_FILES: no package to mutate has $o"
done

status=0
for d in "${dirs[@]}"; do
	args=(unleash "$root/$d" --workers "$workers" --timeout-coefficient "$coefficient" --exclude-files '/')
	what="./$d, every mutant"
	if ((${#only[@]} > 0)); then
		ex=$(excludeOthers "$d")
		[[ -z $ex ]] || args+=(--exclude-files "$ex")
		what="./$d, every mutant of ${only[*]}"
	fi
	if [[ -n ${diffed[$d]:-} ]]; then
		args+=(--diff "$BASE")
		what="./$d, mutants on the lines changed since $BASE"
	fi
	log "$what: $gremlins ${args[*]} ${extra[*]}"
	# gremlins runs `git diff --merge-base BASE` where it starts and matches
	# the file names with paths relative to the package: diff.relative
	# makes git name them so.
	(cd "$root/$d" && GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=diff.relative GIT_CONFIG_VALUE_0=true \
		"$gremlins" "${args[@]}" "${extra[@]}") || status=$?
done
exit $status
