#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# make bench: perf 7.3, unchanged, on a frameless deep program.
# deep_workload (no frame pointers, -O2, dynamic against glibc, its
# .eh_frame tables present) does a fixed amount of CPU-bound work, with a
# getppid() through glibc every ~100 us, DEEP_DEPTH (150) frames below
# main, about 100 bytes a frame (15 KiB of stack).  The work is planned
# once, unprofiled (deep_workload plan DEEP_MS), and the same work is done
# in every run:
#   none   unprofiled;
#   off    perf record -e cpu-clock -F FREQ --call-graph fp,defer with the
#          unwind tables off (kernel.unwind_user_tables=0: frame pointers,
#          which stop at the leaf here);
#   on     the same with the tables on (the Rust kernel's default);
#   fp     on a kernel without the tables switch (upstream C): the same
#          perf command (frame pointers only);
#   dwarf  perf record --call-graph dwarf (perf's default: 8 KiB of user
#          stack copied into every sample, unwound afterwards by perf's
#          libdw unwinder).
# One line per run:
#   BENCH_DEEP mode=M freq=F rounds=N cpu_us=N samples=N deferred=N lost=N
#     bytes=N report_us=N report_cpu_us=N stacks=N depth=N main=N
# cpu_us: the workload's CPU time (cpu_time: user + system from wait4(),
# its task_work's deferred walks included, perf's own work not; under QEMU
# -icount, guest instructions); samples, deferred, lost: perf report
# --stats' totals; bytes: perf.data's size; report_us and report_cpu_us:
# the wall and CPU time of perf report --stdio --no-inline over the file
# (no addr2line in the guest; otherwise perf's defaults: call graphs and
# children), with its fixed start (kallsyms, the objects' symbols); under
# -icount, instructions (for dwarf, perf unwinds every sample then; for
# fp,defer it joins each sample with its deferred record); stacks, depth,
# main: from perf script (deferred records merged into their samples, as
# perf report does), the workload's samples, the median number of user
# frames of their stacks, and how many of those stacks reach main.  perf
# report and perf script run with --max-stack 512 (their default, 127,
# would cut these stacks).  "-" where a mode has no such figure.
#
# As in perf_bench.sh and perf_bench_real.sh, only CPU 0 is online during
# the runs (under -icount every vCPU's instructions advance the clock that
# the CPU times count), and perf_event_max_stack is raised to 512 for them.
#
# TAP: one test per mode: the run and its reports worked, samples were
# taken, none lost, and (fp,defer) deferred records were written.
T=${TMPDIR:-/tmp}/perf_bench_deep
TABLES=/proc/sys/kernel/unwind_user_tables
FREQ=${FREQ:-4000}
DEEP_MS=${DEEP_MS:-400}
MAX_STACK=512
DIR=$(cd "$(dirname "$0")" && pwd)
W=$DIR/deep_workload
CPU_TIME=$DIR/cpu_time
PERF=$(command -v perf)
# Debian's mawk where build-initramfs.sh copied it: much faster than
# busybox awk over perf script's hundreds of thousands of lines.
AWK=awk
[ -x /usr/bin/mawk ] && AWK=/usr/bin/mawk

n=0 fail=0
echo "TAP version 13"
if [ -e "$TABLES" ]; then
	was=$(cat "$TABLES")
	MODES="none off on dwarf"
else
	was=
	MODES="none fp dwarf"
fi
set -- $MODES
echo "1..$#"
. "$DIR/bench_lib.sh"
wait_hres || exit 1
rm -rf "$T"
mkdir -p "$T"
cd "$T" || exit 1
# Only CPU 0 online, perf_event_max_stack raised; both put back at the end.
old_max_stack=$(cat /proc/sys/kernel/perf_event_max_stack)
restore() {
	echo "$old_max_stack" >/proc/sys/kernel/perf_event_max_stack
	[ -n "$was" ] && echo "$was" >"$TABLES"
	cpus_back
}
only_cpu0 || { restore; exit 1; }
echo $MAX_STACK >/proc/sys/kernel/perf_event_max_stack ||
	{ restore; echo "Bail out! cannot set perf_event_max_stack"; exit 1; }
echo "# CPUs online for the runs: $(cat /sys/devices/system/cpu/online);" \
	"perf_event_max_stack $old_max_stack -> $MAX_STACK"
rounds=$("$W" plan "$DEEP_MS") || { restore; echo "Bail out! deep_workload plan failed"; exit 1; }
echo "# work: deep_workload $rounds (about $DEEP_MS ms unprofiled), $FREQ Hz"

# depth <perf script output: "stacks median_depth reaching_main" of the
# workload's samples.  A sample is a header line ("COMM TID") and its
# callchain, one frame a line ending in "(DSO)", then a blank line; user
# frames are those outside [kernel.kallsyms]; a deferred record perf
# could not merge ("DEFERRED CALLCHAIN") and a cookie line are not
# frames.
depth() {
	$AWK '
	function flush() {
		if (blk && comm == "deep_workload") {
			n++
			cnt[nu]++
			if (nu > top)
				top = nu
			if (m)
				reach++
		}
		blk = 0
	}
	/^[ \t]*$/ { flush(); next }
	blk && /\)$/ {
		if ($0 ~ /\(cookie\)/ || $NF == "([kernel.kallsyms])" || $1 ~ /^ffff/)
			next
		nu++
		if ($2 == "main")
			m = 1
		next
	}
	{
		flush()
		blk = index($0, "DEFERRED CALLCHAIN") == 0
		comm = $1
		nu = 0
		m = 0
	}
	END {
		flush()
		if (!n) {
			print 0, "-", 0
			exit
		}
		# The median: the mean of the two middle values (one when n is odd).
		lo = int((n + 1) / 2)
		hi = int(n / 2) + 1
		c = 0
		for (d = 0; d <= top; d++) {
			c += cnt[d]
			if (a == "" && c >= lo)
				a = d
			if (c >= hi) {
				b = d
				break
			}
		}
		printf "%d %g %d\n", n, (a + b) / 2, reach
	}'
}

run() {	# mode
	m=$1
	rm -f cpu.us rep.us rep.cpu
	case $m in
	none)
		sleep 0.2
		"$CPU_TIME" cpu.us "$W" "$rounds" >$m.out 2>$m.err || return 1
		echo "BENCH_DEEP mode=$m freq=- rounds=$rounds cpu_us=$(cat cpu.us) samples=- deferred=-" \
			"lost=- bytes=- report_us=- report_cpu_us=- stacks=- depth=- main=-"
		return 0 ;;
	esac
	cg=$(bench_callgraph $m)
	sleep 0.2
	perf record -q --no-bpf-event --no-buildid -m 4096 -F "$FREQ" -e cpu-clock \
		--call-graph $cg -o $m.data -- "$CPU_TIME" cpu.us "$W" "$rounds" \
		>$m.out 2>$m.err || return 1
	[ -s cpu.us ] || return 1
	[ -n "$was" ] && echo "$was" >"$TABLES"
	set -- $(perf report -i $m.data --stats 2>/dev/null | awk '
		$1 == "SAMPLE" && $2 == "events:" { s = $3 }
		$1 == "CALLCHAIN_DEFERRED" && $2 == "events:" { d = $3 }
		$1 == "LOST" && $2 == "events:" { l = $3 }
		$1 == "LOST_SAMPLES" && $2 == "events:" { l += $3 }
		END { print s + 0, d + 0, l + 0 }')
	s=$1 d=$2 l=$3
	"$CPU_TIME" -w rep.us rep.cpu "$PERF" report -i $m.data --stdio --no-inline \
		--max-stack $MAX_STACK >$m.report 2>>$m.err || return 1
	echo "# $m: perf report --stdio: $(grep -c . $m.report) lines"
	set -- $(perf script -i $m.data --no-inline --max-stack $MAX_STACK \
		-F comm,tid,ip,sym,dso 2>>$m.err | depth)
	echo "BENCH_DEEP mode=$m freq=$FREQ rounds=$rounds cpu_us=$(cat cpu.us) samples=$s" \
		"deferred=$d lost=$l bytes=$(wc -c <$m.data) report_us=$(cat rep.us)" \
		"report_cpu_us=$(cat rep.cpu) stacks=$1 depth=$2 main=$3"
	rm -f $m.data $m.report
	[ "$s" -gt 0 ] && [ "$l" -eq 0 ] && [ "$1" -gt 0 ] || return 1
	case $m in off|on|fp) [ "$d" -gt 0 ] || return 1 ;; esac
	return 0
}

for m in $MODES; do
	n=$((n + 1))
	if run $m; then
		echo "ok $n $m"
	else
		fail=1
		echo "not ok $n $m: the run or its reports failed, no samples, or records lost"
		sed 's/^/#   /' $m.err 2>/dev/null | head -5
	fi
done
restore
cd /
rm -rf "$T"
exit $fail
