#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The real perf tool with deferred user callchains:
#   perf record --call-graph fp,defer  on dc_workload
# then checks, from perf's own output, that
#   1. samples were recorded, every one of them deferred (perf script
#      --no-merge-callchains shows its cookie) except those taken while
#      the task was already exiting, and PERF_RECORD_CALLCHAIN_DEFERRED
#      records were written;
#   2. perf script merges them: every sample whose first user frame is
#      workload_leaf shows the whole chain
#      workload_leaf workload_c workload_b workload_a workload main
#      (without workload_c where the leaf has no frame: see below).
# Output is TAP.

T=${TMPDIR:-/tmp}/perf_defer.$$
mkdir -p "$T"
BIN=$(dirname "$0")/dc_workload
n=0 fail=0
ok() { n=$((n + 1)); echo "ok $n $*"; }
nok() { n=$((n + 1)); fail=1; echo "not ok $n $*"; }

echo "TAP version 13"
echo "1..3"
if ! perf record -q --no-bpf-event -e cpu-clock -F 4000 --call-graph fp,defer \
	-o "$T/perf.data" -- "$BIN" 1000 >"$T/record.out" 2>&1; then
	cat "$T/record.out"
	nok "perf record --call-graph fp,defer failed"
	echo "not ok 2 # SKIP"; echo "not ok 3 # SKIP"
	exit 1
fi

perf report -D -i "$T/perf.data" >"$T/dump.txt" 2>/dev/null
samples=$(grep -c 'PERF_RECORD_SAMPLE' "$T/dump.txt")
deferred=$(grep -c 'PERF_RECORD_CALLCHAIN_DEFERRED' "$T/dump.txt")
# Unmerged view: one block per sample (cookie shown as a "(cookie)" entry)
# and one "DEFERRED CALLCHAIN [cookie: N]" block per deferred record.
perf script -i "$T/perf.data" --no-inline --no-merge-callchains \
	-F comm,tid,ip,sym >"$T/unmerged.txt" 2>/dev/null
awk '
function flush() {
	if (!blk) return
	if (hdr ~ /DEFERRED CALLCHAIN/) drec++
	else if (body ~ /\(cookie\)/) marked++
	else if (body ~ / do_exit| do_group_exit/) exiting++
	else { other++; if (other <= 3) print "# not deferred:" hdr body > "/dev/stderr" }
	blk = 0; body = ""
}
/^[^ \t]/ { flush(); blk = 1; hdr = $0; next }
/^$/ { flush(); next }
{ body = body " " $2 }
END { flush(); printf "%d %d %d %d\n", marked, exiting, other, drec }' \
	"$T/unmerged.txt" >"$T/counts.txt"
read -r marked exiting other drec <"$T/counts.txt"
echo "# perf report -D: $samples samples, $deferred PERF_RECORD_CALLCHAIN_DEFERRED"
echo "# perf script --no-merge-callchains: $marked samples with a cookie, $exiting taken in do_exit (task exiting, not deferred), $other other, $drec DEFERRED CALLCHAIN records"
# A sample taken after the task started exiting is not deferred (the
# request fails with PF_EXITING and perf falls back to in-place user
# unwinding); every other sample must be.
if [ "$samples" -gt 20 ] && [ "$deferred" -gt 0 ] && [ "$drec" -eq "$deferred" ] &&
	[ "$other" -eq 0 ] && [ $((marked + exiting)) -eq "$samples" ]; then
	ok "perf record: $marked of $samples samples deferred with a cookie ($exiting in do_exit), $deferred PERF_RECORD_CALLCHAIN_DEFERRED"
else
	nok "perf record: $samples samples, $marked deferred, $exiting exiting, $other neither; $deferred/$drec deferred records"
fi

# One stack per block; blocks are separated by blank lines.  Print, per
# sample, the offset of its first user frame in its function, then the
# symbols of its user frames (lines not in [kernel.kallsyms]).
perf script -i "$T/perf.data" --no-inline -F comm,tid,ip,sym,symoff,dso \
	>"$T/script.txt" 2>"$T/script.err"
awk '
function hex(s,  v, i, c) {
	v = 0
	s = tolower(s)
	sub(/^0x/, "", s)
	for (i = 1; i <= length(s); i++) {
		c = index("0123456789abcdef", substr(s, i, 1))
		if (!c) break
		v = v * 16 + c - 1
	}
	return v
}
function flush() { if (blk) print off + 0, stack; blk = 0; stack = ""; off = "" }
/^[^ \t]/ { flush(); blk = 1; next }
/^$/ { flush(); next }
/kernel.kallsyms/ { next }
{
	n = split($2, a, "+")
	if (stack == "") off = hex(a[2])
	stack = stack " " a[1]
}
END { flush() }' "$T/script.txt" >"$T/stacks.txt"
# Where the leaf has no frame (before push %rbp; mov %rsp,%rbp, and at its
# ret), the frame-pointer walk skips its direct caller, workload_c: the
# documented limit of frame-pointer unwinding.  The leaf's size (for the
# ret offset) comes from nm at build time.
size=$(cat "$(dirname "$0")/dc_workload.leaf-size")
want=" workload_leaf workload_c workload_b workload_a workload main"
want_fl=" workload_leaf workload_b workload_a workload main"
awk -v size="$size" -v want="$want" -v want_fl="$want_fl" '
{
	off = $1; $1 = ""
	if ($0 !~ /^ workload_leaf /) next
	leaf++
	fl = off < 4 || off == size - 1
	frameless += fl
	if (index($0, fl ? want_fl : want) == 1) exact++
	else if (bad++ < 3) print "# bad (offset " off "):" $0 > "/dev/stderr"
}
END { printf "%d %d %d\n", leaf, exact, frameless }' "$T/stacks.txt" >"$T/leaf.txt"
read -r leaf exact frameless <"$T/leaf.txt"
total=$(wc -l <"$T/stacks.txt")
echo "# perf script: $total samples, $leaf with the leaf as first user frame ($frameless at its frameless entry/exit), $exact with the exact chain"
if [ "$leaf" -gt 0 ] && [ "$exact" -eq "$leaf" ] && [ $((leaf * 2)) -ge "$total" ]; then
	ok "perf script merged stacks: all $leaf leaf samples are$want (without workload_c in the $frameless frameless ones)"
else
	nok "perf script merged stacks: $exact of $leaf leaf samples are$want"
fi

# Every merged sample also shows its kernel part (the workload is mostly
# in getppid/clock_gettime system calls).
kern=$(grep -c 'kernel.kallsyms' "$T/script.txt")
if [ "$kern" -gt 0 ]; then
	ok "perf script shows kernel frames ($kern lines) merged with user frames"
else
	nok "perf script shows no kernel frames"
fi
rm -rf "$T"
exit $fail
