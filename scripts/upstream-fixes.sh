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
#   build      check, then make $BUILD/linux-c-fixed the tree "pristine +
#              series + the project's overlay" (see prepare_tree) and build
#              the kernel variant VARIANT there with build-kernel.sh:
#              c-fixed (the default; the c variant's configuration) or
#              c-fixed-debug (c-debug's).
#   check-log  the selftests' excuses for upstream's bugs count nothing in
#              LOG, the guest log of a c-fixed kernel (see check_log).
#              Result: VARIANT-excuses, after LOG's name (VARIANT-test.log).
#
# $BUILD/linux's own work tree and index are not touched: the scratch tree
# and $BUILD/linux-c-fixed are worktrees of its repository, and the
# scratch one is removed on exit.

. "$(dirname "$0")/lib.sh"

SRC=$BUILD/linux
FIX=$BUILD/linux-c-fixed
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

# check: leaves the series applied in $scratch/linux (pristine + one
# commit per patch) for prepare_tree.
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

# Make $FIX pristine + series + the project's overlay, as overlay.sh makes
# $BUILD/linux pristine + overlay: the C kernel of make check (variant c)
# with the series applied under the overlay.  The project's patches that
# do not apply exactly on top of the series, and change only files the
# series changes, are the Rust kernel's hooks at the places the series
# fixes (today the is_sb_event() and do_exit() hooks of 0003 and 0004,
# under CONFIG_UNWIND_USER_RUST, which a C build does not compile): they
# are left out, and said so.  Any other patch that does not apply fails.
#
# $FIX is a worktree of $BUILD/linux, detached at pristine, kept between
# runs; files are written only when their content changes, so that Kbuild
# rebuilds only what changed, and the change is staged in its index, so
# that `git -C $FIX diff --cached pristine` is the whole of it (which
# build-kernel.sh's up-to-date stamp reads).
prepare_tree() {
	local stage files series_files patches=() p f name skipped=() changed old d

	if [ "$(git -C "$FIX" rev-parse -q --verify pristine 2>/dev/null)" != \
		"$(git -C "$SRC" rev-parse pristine)" ]; then
		log "upstream-fixes: creating $FIX"
		rm -rf "$FIX"
		git -C "$SRC" worktree prune
		git -C "$SRC" worktree add -q --detach "$FIX" pristine
	fi

	stage=$scratch/stage
	mkdir -p "$stage"
	series_files=$(git -C "$scratch/linux" diff --name-only pristine HEAD)
	for p in "$TOP"/patches/*.patch; do
		[ -e "$p" ] && patches+=("$p")
	done

	# 1. The files the series or the project's patches change, from
	# pristine + series, then the project's patches.
	files=$({
		echo "$series_files"
		[ ${#patches[@]} -eq 0 ] || cat "${patches[@]}" | sed -n 's|^+++ b/||p'
	} | sort -u)
	# shellcheck disable=SC2086
	git -C "$scratch/linux" archive HEAD -- $files | tar -x -C "$stage"
	for p in "${patches[@]}"; do
		name=$(basename "$p")
		if patch -d "$stage" -p1 --dry-run --batch --quiet --fuzz=0 <"$p" >/dev/null; then
			patch -d "$stage" -p1 --batch --quiet --fuzz=0 --no-backup-if-mismatch <"$p"
			continue
		fi
		while read -r f; do
			grep -qxF "$f" <<<"$series_files" ||
				die "patch $name does not apply on top of the series and changes $f, which the series does not"
		done < <(sed -n 's|^+++ b/||p' "$p" | sort -u)
		skipped+=("$name")
	done
	[ ${#skipped[@]} -eq 0 ] ||
		log "upstream-fixes: left out (Rust hooks where the series fixes): ${skipped[*]}"

	# 2. The project's new files (as overlay.sh copies them).
	stage_project_files "$stage"

	# 3. Write what changed; restore what an earlier run wrote and this
	# one does not.
	(cd "$stage" && find . -type f | sed 's|^\./||' | sort) >"$scratch.manifest"
	old=$(git -C "$FIX" rev-parse --absolute-git-dir)/c-fixed-manifest
	if [ -f "$old" ]; then
		comm -23 "$old" "$scratch.manifest" | while read -r f; do
			if git -C "$FIX" cat-file -e "pristine:$f" 2>/dev/null; then
				git -C "$FIX" checkout -q pristine -- "$f"
			else
				git -C "$FIX" rm -q --cached --ignore-unmatch -- "$f"
				rm -f "$FIX/$f"
			fi
			log "upstream-fixes: dropped $f"
		done
	fi
	changed=$(rsync -a --no-times --checksum --itemize-changes "$stage/" "$FIX/" |
		grep -c '^>f' || true)
	cp "$scratch.manifest" "$old"
	(cd "$FIX" && xargs -a "$old" -d '\n' git add -f --)
	log "upstream-fixes: $FIX: $(wc -l <"$old") files, $changed written; $(git -C "$FIX" diff --cached --shortstat pristine)"
}

# The selftests excuse on the upstream C kernels what upstream 7.3 gets
# wrong, and print how many they excused; they tell those kernels by
# variant=c... on the command line, which c-fixed is too (dc_variant()
# reads [a-z]*).  With the series those bugs are gone, so in a c-fixed
# log each count must be 0, and each line must be there (a reworded
# message fails rather than passes):
#   samples of a task's last entry without their record, the exit order
#   (patch 1): deferred_exit, deferred_races, deferred_stress, perf_defer.sh;
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
deferred_exit: last-entry samples excused as upstream's exit loss|excused last-entry samples: [0-9]+ in the exit path
deferred_races: last-entry samples excused as upstream's exit loss|\([0-9]+ excused on upstream C: last entry.s record lost at exit\)
deferred_stress: exit-path samples excused on upstream C|exit path on upstream C [0-9]+
perf_defer.sh: exit_group() samples without a record|[0-9]+ samples without one \(upstream exit loss
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
	prepare_tree
	# The scratch worktree is not needed for the build.
	cleanup
	scratch=
	"$TOP/scripts/build-kernel.sh" "$variant"
	;;
check-log)
	check_log "${2:?usage: upstream-fixes.sh check-log LOG}"
	;;
*)
	die "usage: upstream-fixes.sh [check | build [c-fixed|c-fixed-debug] | check-log LOG]"
	;;
esac
