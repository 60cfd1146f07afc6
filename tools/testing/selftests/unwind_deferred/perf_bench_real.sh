#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# make bench: what profiling costs real programs.  Debian's perl, gzip,
# bzip2, grep and python3.11 (real_programs.sh: no frame pointers,
# stripped), each run with the same input:
#   none   unprofiled;
#   off    perf record -e cpu-clock -F FREQ --call-graph fp,defer with the
#          unwind tables off (kernel.unwind_user_tables=0: frame pointers);
#   on     the same with the tables on (the Rust kernel's default), cold:
#          reclaim first drops every file's compiled rows (vm.drop_caches
#          = 2), so the run compiles the rows of every object it meets
#          (its own and its libraries');
#   again  the same once more: the rows compiled from the files by the
#          runs before (kernel.unwind_user_tables_shared, on by default)
#          are found, what a program that ran before pays;
#   cap    the same with each process's own rows (sharing switched off:
#          rows compiled from the process's memory, as for the vDSO)
#          capped at CAP_KB KiB (kernel.unwind_user_tables_max_kb; 1024
#          by default): what the cap costs a program whose rows exceed it
#          (a walk that needs more drops every other object and all rows
#          first, an eviction);
#   fp     on a kernel without the tables switch (upstream C): the same
#          perf command (frame pointers; it has no table walk);
#   dwarf  perf record --call-graph dwarf (perf's default 8 KiB stack
#          copy per sample, unwound later in user space).
# cpu_time runs the program under perf and reports its CPU time (user +
# system): the deferred walks run in its task_work, so they count, and
# perf's own work does not.  One line per run:
#   BENCH_REAL prog=P mode=M freq=F cpu_us=N samples=N deferred=N lost=N
#     bytes=N rows_bytes=N evictions=N
# samples and deferred: perf report --stats' totals; bytes: perf.data's
# size; rows_bytes (modes on, again and cap): the largest unwind_user/stats
# cache_bytes + file_bytes (the objects and own rows of the program's mm,
# and the rows compiled from files, which after on's reclaim are this
# program's) seen during another run, not timed, of the same command, "-"
# where not measured; evictions (on, again and cap): the counter's growth
# over the timed run.  Under QEMU
# -icount (make bench) CPU time counts guest instructions, so the ratios
# of a boot compare the same work; as in perf_bench.sh, only CPU 0 is
# online during the runs (under -icount the guest clock, and so every
# task's CPU time, counts the instructions of every vCPU).
#
# TAP: one test per program: every run worked.
T=${TMPDIR:-/tmp}/perf_bench_real
TABLES=/proc/sys/kernel/unwind_user_tables
STATS=/sys/kernel/debug/unwind_user/stats
CAP=/proc/sys/kernel/unwind_user_tables_max_kb
SHARED=/proc/sys/kernel/unwind_user_tables_shared
CAP_KB=${CAP_KB:-16}
FREQ=${FREQ:-4000}
PROGRAMS="perl gzip bzip2 grep python3.11"
CPU_TIME=$(cd "$(dirname "$0")" && pwd)/cpu_time
# perl's and python's inputs are larger than perf_real.sh's (sized for
# TCG): under -icount each would take a few milliseconds, and a run would
# be mostly its start-up, where every pc is new to the table walk; grep's
# smaller (its matcher is quadratic, and 6,000 lines take seconds of
# -icount time).
# Output goes to a file: GNU grep stops at the first match when its
# output is /dev/null.
PERL_N=${PERL_N:-20}
PYTHON_N=${PYTHON_N:-25}
GREP_LINES=${GREP_LINES:-1000}
. "$(dirname "$0")/real_programs.sh"
. "$(dirname "$0")/bench_lib.sh"

n=0 fail=0
echo "TAP version 13"
set -- $PROGRAMS
echo "1..$#"
[ -e /sys/kernel/debug/unwind_user ] || mount -t debugfs none /sys/kernel/debug 2>/dev/null
wait_hres || exit 1
rm -rf "$T"
mkdir -p "$T"
cd "$T" || exit 1
real_inputs
# Only CPU 0 online (see above); back online at the end.
only_cpu0 || exit 1
echo "# CPUs online for the runs: $(cat /sys/devices/system/cpu/online)"
echo "# inputs: words.txt $(wc -l <words.txt) lines, zip.in $(wc -c <zip.in) bytes, bzip.in $(wc -c <bzip.in) bytes"
was=
if [ -e "$TABLES" ]; then
	was=$(cat "$TABLES")
	MODES="none off on again cap dwarf"
	cap_was=$(cat "$CAP")
	shared_was=$(cat "$SHARED")
else
	MODES="none fp dwarf"
fi

# The largest cache_bytes while $T/running exists.
watch_rows() {
	max=0
	while [ -e "$T/running" ]; do
		v=$(awk '$1 == "cache_bytes" || $1 == "file_bytes" { n += $2 }
			END { print n + 0 }' "$STATS" 2>/dev/null)
		[ -n "$v" ] && [ "$v" -gt "$max" ] && max=$v
		sleep 0.05
	done
	echo "$max" >"$T/rows_bytes"
}

run() {	# program mode
	p=$1 m=$2
	rm -f cpu.us
	set -- $(real_cmd "$p")
	case $m in
	none)
		"$CPU_TIME" cpu.us "$@" >$p.out 2>$p.$m.err || return 1
		echo "# $p: $(wc -c <$p.out) bytes of output: $(head -c 40 $p.out | tr -c '[:print:]' .)"
		echo "BENCH_REAL prog=$p mode=$m freq=- cpu_us=$(cat cpu.us) samples=- deferred=- lost=- bytes=- rows_bytes=- evictions=-"
		return 0 ;;
	esac
	cg=$(bench_callgraph $m)
	tables=
	case $m in on|again|cap) [ -r "$STATS" ] && tables=1 ;; esac
	# on: cold, every file's rows dropped (no process holds any now).
	[ $m = on ] && echo 2 >/proc/sys/vm/drop_caches
	[ -n "$tables" ] && cp "$STATS" stats.before
	perf record -q --no-bpf-event --no-buildid -m 4096 -F $FREQ -e cpu-clock \
		--call-graph $cg -o $p.$m.data -- "$CPU_TIME" cpu.us "$@" \
		>$p.out 2>$p.$m.err || return 1
	[ -s cpu.us ] || return 1
	rows=- evictions=-
	if [ -n "$tables" ]; then
		# The table walk's counters over the run (what the time went to).
		echo "# $p, $m: table walk: $(awk 'NR == FNR { b[$1] = $2; next }
			$2 != b[$1] && $1 != "cache_bytes" && $1 != "file_bytes" {
				printf " %s %+d", $1, $2 - b[$1] }' \
			stats.before "$STATS")"
		evictions=$(awk 'NR == FNR { b[$1] = $2; next }
			$1 == "evictions" { print $2 - b[$1] }' stats.before "$STATS")
		# The rows' bytes: another run, not timed, watched.
		touch running
		watch_rows &
		perf record -q --no-bpf-event --no-buildid -m 4096 -F $FREQ -e cpu-clock \
			--call-graph $cg -o $p.rows.data -- "$@" >$p.out 2>&1
		rm -f running $p.rows.data
		wait
		rows=$(cat rows_bytes 2>/dev/null || echo -)
	fi
	set -- $(perf report -i $p.$m.data --stats 2>/dev/null | awk '
		$1 == "SAMPLE" && $2 == "events:" { s = $3 }
		$1 == "CALLCHAIN_DEFERRED" && $2 == "events:" { d = $3 }
		$1 == "LOST" && $2 == "events:" { l = $3 }
		$1 == "LOST_SAMPLES" && $2 == "events:" { l += $3 }
		END { print s + 0, d + 0, l + 0 }')
	echo "BENCH_REAL prog=$p mode=$m freq=$FREQ cpu_us=$(cat cpu.us) samples=$1 deferred=$2 lost=$3 bytes=$(wc -c <$p.$m.data) rows_bytes=$rows evictions=${evictions:--}"
	rm -f $p.$m.data
}

for p in $PROGRAMS; do
	ok=1
	for m in $MODES; do
		[ $m = cap ] && echo "$CAP_KB" >"$CAP" && echo 0 >"$SHARED"
		run $p $m
		r=$?
		[ $m = cap ] && echo "$cap_was" >"$CAP" && echo "$shared_was" >"$SHARED"
		if [ $r != 0 ]; then
			ok=
			echo "# $p, $m: the run failed:"
			sed 's/^/#   /' $p.$m.err 2>/dev/null | head -5
		fi
	done
	n=$((n + 1))
	if [ -n "$ok" ]; then
		echo "ok $n $p: $MODES"
	else
		fail=1
		echo "not ok $n $p: a run failed"
	fi
done
[ -n "$was" ] && echo "$was" >"$TABLES"
cpus_back
exit $fail
