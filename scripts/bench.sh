#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench: the micro-benchmarks of CONFIG_UNWIND_DEFERRED_BENCH on the
# upstream C and the Rust implementation, side by side.
#
# Both benchmark kernels (no lockdep, no KUnit: unwind_bench.config) are
# booted alternately, C, Rust, C, Rust..., BENCH_REPS times (default 5),
# under QEMU with -icount shift=0,sleep=off, so that guest time counts
# guest instructions and a repetition measures the same work again; then
# once each under plain TCG, for comparison.  The same benchmark code
# (kernel/unwind/bench_deferred.c, C API only) is built into both kernels.
# Each boot then runs the end-to-end benchmark (perf_bench.sh: the perf
# tool profiling a deep-stack workload without, with classic fp and with
# fp,defer callchains); BENCH_E2E=0 skips it.  And the real programs'
# cost (perf_bench_real.sh: Debian perl, gzip, bzip2, grep, python3.11
# unprofiled, with fp,defer and the unwind tables off and on, and with dwarf);
# BENCH_REAL=0 skips it.  And perf on a frameless deep program
# (perf_bench_deep.sh: deep_workload, 150 frames without frame pointers,
# unprofiled, with fp,defer and the unwind tables off and on, and with
# dwarf; CPU time, bytes and perf report time per sample, stack depth);
# BENCH_DEEP=0 skips it.  BENCH_MICRO=0 skips the micro-benchmarks
# (deferred_bench): with BENCH_E2E=0 BENCH_REAL=0 BENCH_REPS=1, a run of
# the deep section alone.
# scripts/bench.py turns the logs into a table (terminal), CSV, JSON, the
# README's and docs' Markdown tables (bench-tables.md) and charts under
# $BUILD/bench/.  No tracked file changes: `make bench-docs` publishes the
# run into docs/ and the README (scripts/bench_tables.py --publish).
. "$(dirname "$0")/lib.sh"

REPS=${BENCH_REPS:-5}
ROUNDS=${BENCH_ROUNDS:-1}
E2E=${BENCH_E2E:-1}
REAL=${BENCH_REAL:-1}
DEEP=${BENCH_DEEP:-1}
MICRO=${BENCH_MICRO:-1}
SECTIONS="guest"
[ "$MICRO" = 0 ] || SECTIONS="$SECTIONS deferred_bench deferred_bench_32"
[ "$E2E" = 0 ] || SECTIONS="$SECTIONS perf_bench"
[ "$REAL" = 0 ] || SECTIONS="$SECTIONS perf_bench_real"
[ "$DEEP" = 0 ] || SECTIONS="$SECTIONS perf_bench_deep"
OUT=$BUILD/bench
mkdir -p "$OUT"
rm -f "$OUT"/*.log

# The commit the kernels are built from, taken before they are (the tree
# may move on during the run); -dirty if tracked files differ from it.
COMMIT=$(git -C "$TOP" rev-parse --short=7 HEAD 2>/dev/null || echo unknown)
git -C "$TOP" diff --quiet HEAD -- 2>/dev/null || COMMIT=$COMMIT-dirty

"$TOP/scripts/build-kernel.sh" c-bench
"$TOP/scripts/build-kernel.sh" rust-bench
# The bench kernel is the one optimised for speed (its C helpers inlined
# at link time): the task_work path's stack must stay under 1 KiB there
# too (issue 17; make check holds the test kernels to it, see
# scripts/check-symbols.sh).
python3 "$TOP/scripts/stack-depth.py" --check --brief --cross-check --max 1016 --goal 1024 \
	--label kernel-rust-bench "$BUILD/kernel-rust-bench/kernel/unwind/rust/unwind_rust.o" ||
	die "bench: kernel-rust-bench's stack is over 1 KiB (see above)"

run() {
	local variant=$1 mode=$2 rep=$3 extra=
	[ "$mode" = icount ] && extra="-icount shift=0,sleep=off"
	log "bench: $mode $rep/$REPS, kernel $variant"
	# shellcheck disable=SC2086	# $SECTIONS: one argument each
	# loglevel=5: warnings and worse still reach the console (and the log
	# checker), informational messages do not cut the BENCH lines.
	QEMU_EXTRA=$extra GUEST_APPEND="rounds=$ROUNDS e2e=$E2E real=$REAL deep=$DEEP micro=$MICRO loglevel=5" \
		GUEST_TIMEOUT=${BENCH_TIMEOUT:-1800} \
		"$TOP/scripts/run-guest.sh" "$variant-bench" bench $SECTIONS >"$OUT/run.out" 2>&1 ||
		{ cat "$OUT/run.out"; die "bench guest failed: kernel $variant-bench ($mode)"; }
	cp "$BUILD/logs/$variant-bench-bench.log" "$OUT/$variant-$mode-$rep.log"
}

for rep in $(seq 1 "$REPS"); do
	run c icount "$rep"
	run rust icount "$rep"
done
run c tcg 1
run rust tcg 1

# Debian's python3, whose python3-matplotlib setup.sh installs (another
# python3 may come first in PATH).
/usr/bin/python3 "$TOP/scripts/bench.py" "$OUT" --commit "$COMMIT" \
	--kernel-version "$(cat "$BUILD/source-version.txt" 2>/dev/null | head -1)"
echo "bench: to publish this run (docs/bench.{json,csv,svg}, docs/bench-e2e.svg and the"
echo "  tables of README.md and docs/benchmarks.md): make bench-docs"
