#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The gimli oracle of the CFI interpreter (host/tests/cfi_oracle.rs) after
# make check's builds, with every object it names required: the machine's
# libc, ld.so and libm (64- and 32-bit), the test binary, and what the
# builds made under $BUILD: perf and the vDSOs of kernel-c and
# kernel-rust.  host-test.sh ran it before the builds, with those SKIP.
# Prints the per-object, per-cause figures; result: objects checked,
# failures.
. "$(dirname "$0")/lib.sh"
mkdir -p "$BUILD/results"
rm -f "$BUILD/results/host-oracle.txt"
export BUILD
cd "$TOP"
rc=0
out=$(UNWIND_ORACLE_BUILT=1 cargo test --release --test cfi_oracle -- --nocapture 2>&1) || rc=$?
echo "$out" | sed -n '/^cfi oracle: /,/^cfi oracle: .* objects checked/p'
sum=$(echo "$out" | sed -n 's/^cfi oracle: \([0-9]*\) objects checked, \([0-9]*\) SKIP, \([0-9]*\) failures.*/\1 \2 \3/p')
if [ -z "$sum" ]; then
	echo "$out" | tail -40
	die "cfi oracle: no summary (did it build and run?)"
fi
read -r checked skipped failed <<<"$sum"
# Nothing may be skipped here, and a failing run counts as a failure.
[ "$skipped" -eq 0 ] || die "cfi oracle: $skipped objects skipped"
[ "$rc" -eq 0 ] || [ "$failed" -gt 0 ] || failed=1
echo "$checked $failed host-oracle" >"$BUILD/results/host-oracle.txt"
[ "$rc" -eq 0 ] || { echo "$out" | grep -A30 panicked | head -40; die "cfi oracle failed"; }
