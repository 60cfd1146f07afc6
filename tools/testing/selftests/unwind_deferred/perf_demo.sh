#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The main job: profile dc_workload with deferred user callchains and show
# what the perf tool makes of it.
T=${TMPDIR:-/tmp}/perf_demo
mkdir -p "$T"
cd "$T" || exit 1
set -x
perf record --no-bpf-event -e cpu-clock -F 4000 --call-graph fp,defer -o perf.data -- \
	/tests/dc_workload 1500 || exit 1
{ set +x; } 2>/dev/null
echo "---- three merged stacks (perf script): kernel part from the sample,"
echo "---- user part from the PERF_RECORD_CALLCHAIN_DEFERRED with its cookie"
perf script -i perf.data --no-inline -F comm,tid,time,ip,sym,dso 2>/dev/null |
	awk 'BEGIN { RS = "" } /workload_leaf/ && n < 3 { print; print ""; n++ }'
echo "---- unmerged (perf script --no-merge-callchains): a sample, whose user"
echo "---- part is only its cookie, then the DEFERRED CALLCHAIN record of that cookie"
perf script -i perf.data --no-inline --no-merge-callchains 2>/dev/null |
	awk 'BEGIN { RS = "" }
	/\(cookie\)/ { prev = $0; match($0, /[0-9a-f]+ \(cookie\)/); c = substr($0, RSTART, RLENGTH - 9); next }
	/DEFERRED CALLCHAIN/ && /workload_leaf/ && prev != "" && index($0, "cookie: " c "]") && n < 2 {
		print prev; print ""; print; print ""; n++; prev = ""
	}'
echo "---- counts (perf report -D)"
perf report -D -i perf.data 2>/dev/null >dump.txt
echo "samples:                         $(grep -c 'PERF_RECORD_SAMPLE' dump.txt)"
echo "PERF_RECORD_CALLCHAIN_DEFERRED:  $(grep -c 'PERF_RECORD_CALLCHAIN_DEFERRED' dump.txt)"
echo "PERF_CONTEXT_USER_DEFERRED marks: $(grep -c 'PERF_CONTEXT_USER_DEFERRED' dump.txt)"
echo "---- perf report --stdio -S workload_leaf (the leaf's own samples, with their"
echo "---- merged call chain; its share depends on how many samples hit syscalls)"
perf report -i perf.data --stdio --no-inline --no-children -S workload_leaf 2>&1 |
	grep -v '^#' | grep -v '^$' | head -40
echo "---- flame graph of the merged stacks: perf script --no-inline, every"
echo "---- sample with its deferred user part; gzip | base64 between the"
echo "---- markers, drawn on the host with inferno (scripts/flamegraph.sh)"
perf script -i perf.data --no-inline -F comm,tid,time,event,ip,sym,dso \
	2>/dev/null >script.txt
echo "perf script: $(grep -c 'cpu-clock:' script.txt) samples," \
	"$(grep -c 'workload_leaf' script.txt) with workload_leaf," \
	"$(wc -c <script.txt) bytes"
echo "#### BEGIN perf-script.gz.b64"
gzip -9 -c script.txt | base64
echo "#### END perf-script.gz.b64"
echo "---- code without frame pointers (frameless_workload: -O2"
echo "---- -fomit-frame-pointer, dynamic glibc), perf record --call-graph fp,defer"
TABLES=/proc/sys/kernel/unwind_user_tables
# The counters are in debugfs.
grep -q " /sys/kernel/debug debugfs " /proc/mounts ||
	mount -t debugfs none /sys/kernel/debug 2>/dev/null
if [ -w "$TABLES" ]; then modes="0 1"; was=$(cat "$TABLES"); else modes=none; fi
fail=0
# A kernel built with unwind tables must have the switch (fail closed).
if [ "$modes" = none ] && grep -q ' unwind_user_mm_exit$' /proc/kallsyms; then
	echo "FAIL: this kernel has unwind tables but no $TABLES"
	fail=1
fi
for m in $modes; do
	if [ "$m" = none ]; then
		echo "---- this kernel has no unwind tables: frame pointers only"
	else
		echo "$m" >"$TABLES"
		echo "---- unwind tables $([ "$m" = 1 ] && echo on || echo off)" \
			"(echo $m > $TABLES)"
	fi
	perf record --no-bpf-event -e cpu-clock -F 4000 --call-graph fp,defer \
		-o frameless.data -- /tests/frameless_workload 1000 2>/dev/null || exit 1
	perf script -i frameless.data --no-inline -F comm,tid,ip,sym,dso 2>/dev/null \
		>frameless.txt
	echo "two merged stacks of the comparator and of the read() wrapper:"
	awk 'BEGIN { RS = "" }
	     /sort_cmp/ && a < 1 { print; print ""; a++ }
	     /read_from_/ && !/sort_cmp/ && b < 1 { print; print ""; b++ }' frameless.txt
	stacks=$(awk 'BEGIN { RS = "" } /cpu-clock|frameless/ { n++ } END { print n + 0 }' frameless.txt)
	mains=$(awk 'BEGIN { RS = "" } / main[+ ]/ { n++ } END { print n + 0 }' frameless.txt)
	echo "stacks: $stacks, reaching main: $mains," \
		"reaching _start: $(awk 'BEGIN { RS = "" } / _start / { n++ } END { print n + 0 }' frameless.txt)"
	# With tables on, the frameless program's stacks reach main (the
	# rest: samples in the start-up and exit, before and after main).
	if [ "$m" = 1 ] && [ $((mains * 2)) -lt "$stacks" ]; then
		echo "FAIL: with unwind tables on, only $mains of $stacks stacks reach main"
		fail=1
	fi
done
if [ "$modes" != none ]; then
	echo "$was" >"$TABLES"
	echo "---- $(grep -E '^(walks|table_frames|fp_frames|lookups|row_hits|row_misses|files_found|files_cached|file_bytes|cache_bytes|end_of_stack) ' \
		/sys/kernel/debug/unwind_user/stats | tr '\n' ' ')"
fi
exit $fail
