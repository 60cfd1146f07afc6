#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# trace-call.sh VARIANT FUNCTION SKIP [GUEST_APPEND...]: where one call of
# a kernel function spends its instructions.  Boots build/kernel-VARIANT
# (built, with nokaslr) in the bench job with QEMU's gdbstub, lets SKIP
# calls of FUNCTION go by, single-steps the next one to its return
# (scripts/trace_call.py) and prints its instructions by function
# (scripts/trace_attrib.py; the trace is build/trace-VARIANT.json, for
# --fn).  A development aid: make bench's -icount figures say how many
# instructions, this says which.  Example, a warm 64-bit walk by tables
# of the micro-benchmarks (15 or 71 frames: which walk a call number
# reaches varies by a few from boot to boot; the total says which):
#   scripts/trace-call.sh rust-bench unwind_user_faultable 610
. "$(dirname "$0")/lib.sh"
[ $# -ge 3 ] || die "usage: trace-call.sh VARIANT FUNCTION SKIP [GUEST_APPEND...]"
variant=$1 fn=$2 skip=$3
shift 3
command -v gdb >/dev/null || die "trace-call: needs gdb"
vmlinux=$BUILD/kernel-$variant/vmlinux
[ -f "$vmlinux" ] || die "trace-call: no $vmlinux (build the kernel first)"
out=$BUILD/trace-$variant.json
QEMU_EXTRA="-s" GUEST_APPEND="rounds=1 e2e=0 real=0 deep=0 micro=1 nokaslr loglevel=5 $*" \
	GUEST_TIMEOUT=900 "$TOP/scripts/run-guest.sh" "$variant" bench guest \
	>"$BUILD/trace-$variant.guest.log" 2>&1 &
guest=$!
sleep 2
TRACE_FN=$fn TRACE_SKIP=$skip TRACE_OUT=$out timeout 900 \
	gdb -q -batch -x "$TOP/scripts/trace_call.py" "$vmlinux" | grep '^TRACED' || true
wait $guest 2>/dev/null || true
[ -f "$out" ] || die "trace-call: no trace (see $BUILD/trace-$variant.guest.log)"
python3 "$TOP/scripts/trace_attrib.py" "$vmlinux" "$out"
