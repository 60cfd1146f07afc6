#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# bench-src.sh COMMIT...: the Rust benchmark kernel built from each
# COMMIT's src/ (the rest of the tree as it is), one -icount boot of the
# micro-benchmarks and perf_bench each, and a line of figures per commit
# (scripts/bench_src_summary.py: warm, cold, second and shared first walk
# a frame at 15 frames, sys1 and cpu4k us a sample).  A development aid to
# bisect a cost change (about a minute a commit); src/ is put back to
# HEAD's after each.  make bench's figures are the published ones.
. "$(dirname "$0")/lib.sh"
cd "$TOP"
git diff --quiet HEAD -- src || die "bench-src: src/ has changes; commit or stash them"
trap 'git checkout -q HEAD -- src' EXIT
for c in "$@"; do
	git checkout -q HEAD -- src
	git checkout -q "$c" -- src
	"$TOP/scripts/overlay.sh" >/dev/null
	"$TOP/scripts/build-kernel.sh" rust-bench >/dev/null
	QEMU_EXTRA="-icount shift=0,sleep=off" \
		GUEST_APPEND="rounds=1 e2e=1 real=0 deep=0 micro=1 loglevel=5" GUEST_TIMEOUT=1800 \
		"$TOP/scripts/run-guest.sh" rust-bench bench guest deferred_bench deferred_bench_32 perf_bench \
		>/dev/null 2>&1 || { log "bench-src: $c: guest run failed (no figures)"; continue; }
	cp "$BUILD/logs/rust-bench-bench.log" "$BUILD/bench-src-$c.log"
	python3 "$TOP/scripts/bench_src_summary.py" "$BUILD/bench-src-$c.log"
done
"$TOP/scripts/overlay.sh" >/dev/null
