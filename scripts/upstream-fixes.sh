#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# upstream-fixes.sh [check | build [VARIANT] | check-log LOG]
#
# The project's fixes to upstream 7.3 as C patches for upstream
# (patches/upstream/, one per bug; README, "Deviations from upstream 7.3").
#
#   check      (the default) apply the series with `git am`, patch by
#              patch, to the pristine tag in a scratch worktree of
#              $BUILD/linux, check that each patch has a Fixes: tag, and run
#              checkpatch --strict on it.  Result: upstream-series.
#   build      check, then build the kernel variant VARIANT with
#              build-kernel.sh from $BUILD/linux-fixed, the tree "pristine
#              + series + the project" that overlay.sh makes (the Rust
#              kernels' tree): c-fixed (the default; the c variant's
#              configuration) or c-fixed-debug (c-debug's).
#   check-log  the selftests' excuses for upstream's bugs count nothing in
#              LOG, the guest log of a c-fixed kernel (see check_log).
#              Result: VARIANT-excuses, after LOG's name (VARIANT-test.log).
#
# $BUILD/linux's own work tree and index are not touched: the scratch tree
# is a worktree of its repository, removed on exit.

. "$(dirname "$0")/lib.sh"

SRC=$BUILD/linux
SERIES=$TOP/patches/upstream

# result NAME PASSED FAILED: a result for summary.sh.
result() {
	mkdir -p "$BUILD/results"
	echo "$2 $3 $1" >"$BUILD/results/$1.txt"
}

scratch=
cleanup() {
	[ -n "$scratch" ] || return 0
	git -C "$SRC" worktree remove --force "$scratch/linux" 2>/dev/null || true
	rm -rf "$scratch" "$scratch.manifest"
	git -C "$SRC" worktree prune
}
trap cleanup EXIT

# check: the series applied in $scratch/linux (pristine + one commit per
# patch), then checkpatch.
check() {
	local p name pass=0 fail=0 left

	[ -d "$SRC/.git" ] || die "no kernel tree in $SRC: run scripts/fetch-source.sh"
	git -C "$SRC" rev-parse -q --verify pristine >/dev/null || die "$SRC has no 'pristine' tag"
	series=("$SERIES"/*.patch)
	[ -e "${series[0]}" ] || die "no patches in $SERIES"

	scratch=$(mktemp -d "$BUILD/.upstream-fixes.XXXXXX")
	log "upstream-fixes: scratch worktree at pristine ($scratch/linux)"
	git -C "$SRC" worktree add -q --detach "$scratch/linux" pristine

	left=${#series[@]}
	for p in "${series[@]}"; do
		name=$(basename "$p")
		if ! grep -qE '^Fixes: [0-9a-f]{12,} \(".+"\)$' "$p"; then
			echo "$name: no Fixes: tag" >&2
			fail=$((fail + 1))
		fi
		# No three-way merge, no fuzz: the patch applies as it is.
		if ! git -C "$scratch/linux" -c user.name=pipeline \
			-c user.email=pipeline@localhost \
			am -q --no-3way --whitespace=error "$p"; then
			echo "$name does not apply to pristine + the patches before it" >&2
			git -C "$scratch/linux" am --abort || true
			# The rest of the series cannot be tried.
			fail=$((fail + left))
			result upstream-series "$pass" "$fail"
			die "upstream-fixes: the series does not apply"
		fi
		log "upstream-fixes: applied $name"
		pass=$((pass + 1))
		left=$((left - 1))
	done

	# UNKNOWN_COMMIT_ID: $BUILD/linux is Debian's tarball imported as
	# one commit, without upstream's history, so checkpatch cannot look
	# up the commits the Fixes: tags name (each patch's notes say where
	# they were checked).  Every other warning and check counts.  Run
	# from the kernel tree: run inside this project's repository,
	# checkpatch takes a git-tracked file for a source file, not a patch.
	if (cd "$scratch/linux" &&
		./scripts/checkpatch.pl --strict --terse --ignore UNKNOWN_COMMIT_ID \
			"${series[@]}"); then
		log "upstream-fixes: checkpatch --strict: clean"
		pass=$((pass + 1))
	else
		echo "checkpatch --strict: the series has style problems (above)" >&2
		fail=$((fail + 1))
	fi
	result upstream-series "$pass" "$fail"
	[ "$fail" -eq 0 ] || die "upstream-fixes: the series fails its checks"
}

# The selftests excuse on the upstream C kernels what upstream 7.3 gets
# wrong, and print how many they excused; they tell those kernels by
# variant=c... on the command line, which c-fixed is too (dc_variant()
# reads [a-z]*).  With the series those bugs are gone, so in a c-fixed
# log each count must be 0, and each line must be there (a reworded
# message fails rather than passes):
#   samples of a task's last entry without their record, the exit order
#   (patch 1): deferred_exit, deferred_races, deferred_stress, deferred_mtexec,
#   perf_defer.sh;
#   requests that returned their bit value (patch 3): deferred_nmi.
# And deferred_nmi's count of calls of a new work for an old work's
# request (patch 4) is printed only when it is not 0: it must be absent.
check_log() {
	local glog=$1 name what re n nums pass=0 fail=0

	[ -f "$glog" ] || die "no guest log $glog"
	name=$(basename "$glog" .log)
	name=${name%-test}-excuses
	while IFS='|' read -r what re; do
		nums=$(grep -aoE "$re" "$glog" | grep -oE '[0-9]+' || true)
		if [ -z "$nums" ]; then
			echo "$what: no line matches '$re'" >&2
			fail=$((fail + 1))
			continue
		fi
		for n in $nums; do
			if [ "$n" -ne 0 ]; then
				echo "$what: $n (must be 0 with the series)" >&2
				fail=$((fail + 1))
			else
				pass=$((pass + 1))
			fi
		done
	done <<'EOF'
deferred_exit: SIGKILL-entry samples excused as upstream's exit loss|excused samples without a record: [0-9]+ of an entry its SIGKILL was traced in
deferred_races: SIGKILL-entry samples excused as upstream's exit loss|\([0-9]+ excused on upstream C: the traced entry.s record lost at exit\)
deferred_stress: exit_group()-entry samples excused on upstream C|exit_group\(\) entry on upstream C [0-9]+
perf_defer.sh: exit_group() samples without a record|[0-9]+ samples without one \(upstream exit loss
deferred_mtexec: traced-death entries excused as upstream's exit loss|exit-loss entries excused on upstream C, each a traced death.s: [0-9]+
deferred_nmi: requests that returned their bit, not 1|C first request returned its bit [0-9]+
EOF
	if grep -aqE "cancel race: upstream C: [0-9]+ calls of a new work" "$glog"; then
		grep -aE "cancel race: upstream C: [0-9]+ calls of a new work" "$glog" >&2
		fail=$((fail + 1))
	else
		pass=$((pass + 1))
	fi
	result "$name" "$pass" "$fail"
	log "upstream-fixes: $glog: $pass excuse counts 0, $fail not"
	[ "$fail" -eq 0 ]
}

case ${1:-check} in
check)
	check
	;;
build)
	variant=${2:-c-fixed}
	case $variant in
	c-fixed | c-fixed-debug) ;;
	*) die "upstream-fixes.sh build: no variant $variant (c-fixed, c-fixed-debug)" ;;
	esac
	check
	cleanup
	scratch=
	"$TOP/scripts/overlay.sh"
	"$TOP/scripts/build-kernel.sh" "$variant"
	;;
check-log)
	check_log "${2:?usage: upstream-fixes.sh check-log LOG}"
	;;
*)
	die "usage: upstream-fixes.sh [check | build [c-fixed|c-fixed-debug] | check-log LOG]"
	;;
esac
