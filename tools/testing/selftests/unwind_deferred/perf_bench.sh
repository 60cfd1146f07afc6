#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# End-to-end benchmark of make bench: the perf tool, unchanged, profiling
# e2e_workload (a fixed amount of work under a 150-frame frame-pointer
# stack) with cpu-clock, three ways per case:
#   none   unprofiled;
#   fp     perf record --call-graph fp: the user stack unwound in the
#          interrupt, in every sample;
#   defer  perf record --call-graph fp,defer: one user stack per kernel
#          entry, in a PERF_RECORD_CALLCHAIN_DEFERRED record, written when
#          the task returns to user space (the kernel, C or Rust, decides
#          whose implementation this is).
# Cases: the syscall-bound workload (readv() of /dev/zero, each call
# lasting about SPE sample periods) at 1, 3, 10 and 100 samples per kernel
# entry at 4 kHz, and the CPU-bound one (one sample per entry) at 1, 4 and
# 10 kHz.  A case's work is planned once, unprofiled (e2e_workload plan),
# and the same work is done in all three runs.
#
# For each run one line (fields as e2e_records prints them):
#   BENCH_E2E case=C freq=F mode=none|fp|defer ns=N cpu_ns=N frames=N
#     samples=N samples_all=N deferred=N entries=N sample_bytes=N
#     deferred_bytes=N ideal_bytes=N depth=N nocookie=N norecord=N
#     multirecord=N records_all=N lost=N throttled=N data_bytes=N
# ns: the workload's own CLOCK_MONOTONIC time around its work (under QEMU
# -icount, guest instructions); cpu_ns: its thread's CPU time around it
# (with the interrupts and the task_work it runs, without other tasks);
# frames: the frame-pointer frames from the workload's leaf.  Samples and
# deferred records are those of the work's window (perf record -k mono
# stamps them with the same clock): samples, the window's samples
# (samples_all: the whole file's); entries, the distinct cookies of those
# samples (kernel entries sampled); deferred, the records of those
# cookies; sample_bytes and deferred_bytes, the sizes of those records in
# the ring buffer (their headers' size); ideal_bytes, each sample's own
# part (its record without the user chain: here without the
# PERF_CONTEXT_USER_DEFERRED marker and the cookie) plus one deferred
# record per kernel entry; depth, the longest user stack (in the samples
# for fp, in the records for defer); records_all, all deferred records in
# the file; data_bytes, the perf.data file.  A figure a mode cannot show
# (classic fp has no cookies: no entries) is "-", never 0.
#
# e2e_records reads those figures from perf.data: perf report -D prints
# the same (record sizes in its "[0x...]" headers, callchains), but takes
# seconds of host time per run under TCG.  So perf itself checks them:
# perf report --stats gives the same sample and deferred-record totals in
# every run, and for two runs (DUMP_RUNS) perf report -D, read by awk
# (analyse), gives exactly the same line.
#
# The runs are made quiet, so that a run's time is the work and the
# profiling of it, the same in every repetition: only CPU 0 is online
# (under -icount the guest clock counts the instructions of every vCPU:
# the perf tool or a kernel thread running on another would be counted),
# perf record's ring buffer (-m) holds a whole run, so perf does not wake
# up to drain it during the run, nothing is written to the console during
# a case's runs, and each run starts after a short sleep (idle time, which
# -icount sleep=off skips), after the work a previous run left behind
# (freeing its events and ring buffer).  perf record also runs with -B (no
# build-id post-processing, which reads the whole file again after the run)
# and -k mono.  The kernel's perf_event_max_stack (default 127 entries,
# kernel and user together, too few for this stack) is raised for the
# runs, so that classic fp records the whole user stack as defer does, and
# restored after.
#
# Output is TAP: one test per case, "not ok" if a run fails, if perf and
# e2e_records disagree, if records were lost or throttled, or if in the
# defer run a sample has no cookie or a sampled kernel entry does not have
# exactly one deferred record.
W=$(dirname "$0")/e2e_workload
R=$(dirname "$0")/e2e_records
T=${TMPDIR:-/tmp}/perf_bench
MAX_STACK=512
RING_PAGES=1024		# 4 MiB: the largest run writes less than 1 MiB
# case:freq:kind:samples per entry:guest ms of work.  A few tens of ms are
# enough (under -icount repetitions agree within 1%); the syscall case at
# 100 samples per entry needs a few entries, the 1 kHz one a hundred
# samples.
CASES="sys1:4000:sys:1:40 sys3:4000:sys:3:40 sys10:4000:sys:10:50
sys100:4000:sys:100:100 cpu1k:1000:cpu::100 cpu4k:4000:cpu::40 cpu10k:10000:cpu::40"
# The runs whose files are also read from perf report -D (slow under TCG:
# the smallest file of each mode), to check e2e_records against perf's own
# dump: case:mode.
DUMP_RUNS="cpu1k:fp sys100:defer"

mkdir -p "$T"
cd "$T" || exit 1
fail=0
n=0
echo "TAP version 13"
echo "1..$(echo $CASES | wc -w)"

. "$(dirname "$0")/bench_lib.sh"
wait_hres || exit 1
old_max_stack=$(cat /proc/sys/kernel/perf_event_max_stack)
restore() {
	echo "$old_max_stack" >/proc/sys/kernel/perf_event_max_stack
	cpus_back
}
only_cpu0 || exit 1
if ! echo $MAX_STACK >/proc/sys/kernel/perf_event_max_stack; then
	restore
	echo "Bail out! cannot set perf_event_max_stack"
	exit 1
fi
echo "# perf_event_max_stack $old_max_stack -> $MAX_STACK for the runs;" \
	"CPUs online $(cat /sys/devices/system/cpu/online);" \
	"clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"

# Analyse perf report -D of one run: prints the fields of its BENCH_E2E
# line, from "samples=".  $1: the dump, $2: t0, $3: t1, $4: mode.
analyse() {
	awk -v t0="$2" -v t1="$3" -v mode="$4" '
	function hex(s,  v, i, c) {
		v = 0
		s = tolower(s)
		sub(/^0x/, "", s)
		for (i = 1; i <= length(s); i++) {
			c = index("0123456789abcdef", substr(s, i, 1))
			if (!c)
				break
			v = v * 16 + c - 1
		}
		return v
	}
	function cookie(s) {
		s = tolower(s)
		sub(/^0x/, "", s)
		sub(/^0+/, "", s)
		return s
	}
	function end_record() {
		if (kind == "S" && inwin) {
			samples++
			sbytes += size
			if (ck != "") {
				nck[ck]++
				own += size - 16	# marker and cookie
			} else {
				nocookie++
			}
			if (nuser > depth)
				depth = nuser
		} else if (kind == "D") {
			drec++
			dbytes_of[dck] += size
			nrec[dck]++
			if (nips > ddepth[dck])
				ddepth[dck] = nips
		}
		kind = ""
	}
	# "TIME OFFSET [0xSIZE]: PERF_RECORD_TYPE...": a record starts.
	$3 ~ /^\[0x[0-9a-f]+\]:$/ && $4 ~ /^PERF_RECORD_/ {
		end_record()
		size = hex(substr($3, 2, length($3) - 3))
		type = $4
		sub(/[(:].*/, "", type)
		if (type == "PERF_RECORD_SAMPLE") {
			kind = "S"
			all++
			inwin = $1 >= t0 && $1 <= t1
			ck = ""
			nuser = 0
			user = 0
			deferred = 0
		} else if (type == "PERF_RECORD_CALLCHAIN_DEFERRED") {
			kind = "D"
			dck = cookie($NF)
			nips = 0
		} else if (type == "PERF_RECORD_LOST" || type == "PERF_RECORD_LOST_SAMPLES") {
			lost++
		} else if (type == "PERF_RECORD_THROTTLE") {
			throttle++
		}
		next
	}
	# Callchain entries: "..... N: VALUE (annotation)".
	kind != "" && $1 == "....." {
		if (kind == "D") {
			nips++
		} else if ($4 == "(PERF_CONTEXT_USER_DEFERRED)") {
			deferred = 1
		} else if (deferred == 1) {
			ck = cookie($3)
			deferred = 2
		} else if ($4 == "(PERF_CONTEXT_USER)") {
			user = 1
		} else if (user) {
			nuser++
		}
	}
	END {
		end_record()
		entries = 0
		for (c in nck) {
			entries++
			if (c in nrec) {
				dwin += nrec[c]
				dbytes += dbytes_of[c]
				ideal += dbytes_of[c] / nrec[c]
				if (nrec[c] != 1)
					multi++
				if (ddepth[c] > depth)
					depth = ddepth[c]
			} else {
				norec++
			}
		}
		if (mode == "fp") {
			printf "samples=%d samples_all=%d deferred=- entries=- sample_bytes=%d deferred_bytes=- ideal_bytes=- depth=%d",
				samples, all, sbytes, depth
			printf " nocookie=- norecord=- multirecord=-"
		} else {
			printf "samples=%d samples_all=%d deferred=%d entries=%d sample_bytes=%d deferred_bytes=%d ideal_bytes=%d depth=%d",
				samples, all, dwin, entries, sbytes, dbytes, own + ideal, depth
			printf " nocookie=%d norecord=%d multirecord=%d", nocookie, norec, multi
		}
		printf " records_all=%d lost=%d throttled=%d\n", drec, lost, throttle
	}' "$1"
}

# The table walk's counters (debugfs, kernels with unwind tables), one
# "name value" a line; nothing elsewhere.
STATS=/sys/kernel/debug/unwind_user/stats
stats() {
	[ -e $STATS ] || mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
	[ -r $STATS ] && cat $STATS
}

# The counters a run moved, "name=delta ...": $1 before, $2 after.
stats_delta() {
	printf '%s\n%s\n' "$1" "$2" | awk '
		!($1 in a) { a[$1] = $2; order[++n] = $1; next }
		{ d[$1] = $2 - a[$1] }
		END { for (i = 1; i <= n; i++) if (d[order[i]]) printf "%s=%d ", order[i], d[order[i]] }'
}

# One run: $1 case, $2 freq, $3 mode, then the workload's arguments.
# Prints its BENCH_E2E line; fails if the run or its analysis fails.
run() {
	c=$1 f=$2 m=$3
	shift 3
	D=$T/$c-$m
	mkdir -p "$D"
	sleep 0.2
	case $m in
	none)
		"$W" "$@" >"$D/out" 2>&1 ;;
	fp|defer)
		cg=fp
		[ "$m" = defer ] && cg=fp,defer
		s0=$(stats)
		perf record -q -B -m $RING_PAGES --no-bpf-event -k mono -e cpu-clock -F "$f" \
			--call-graph $cg -o "$D/perf.data" -- "$W" "$@" >"$D/out" 2>&1 ;;
	esac || { echo "# $c $m: run failed:"; sed 's/^/# /' "$D/out"; return 1; }
	# What the table walk did in the run (the whole run, not only the
	# workload's window): where its cost went.
	[ "$m" = defer ] && [ -n "$s0" ] &&
		echo "# $c $m: table walk counters: $(stats_delta "$s0" "$(stats)")"
	# shellcheck disable=SC2046	# five words, or none
	set -- $(sed -n 's/^t0=\([0-9]*\) t1=\([0-9]*\) \(ns=[0-9]* cpu_ns=[0-9]* frames=[0-9]*\)$/\1 \2 \3/p' "$D/out")
	[ $# -eq 5 ] || { echo "# $c $m: no times from the workload:"; sed 's/^/# /' "$D/out"; return 1; }
	line="BENCH_E2E case=$c freq=$f mode=$m $3 $4 $5"
	if [ "$m" != none ]; then
		fig=$("$R" "$D/perf.data" "$1" "$2" "$m") || return 1
		check_stats "$D/perf.data" "$fig" || return 1
		if echo " $DUMP_RUNS " | grep -q " $c:$m "; then
			check_dump "$D/perf.data" "$1" "$2" "$m" "$fig" || return 1
		fi
		line="$line $fig data_bytes=$(wc -c <"$D/perf.data")"
	fi
	rm -rf "$D"
	echo "$line"
}

# perf report --stats counts the file's samples and deferred records as
# e2e_records does.  $1: perf.data, $2: e2e_records' figures.
check_stats() {
	set -- $(perf report --stats -i "$1" 2>/dev/null | awk '
		/ SAMPLE events:/ && s == "" { s = $3 }
		/ CALLCHAIN_DEFERRED events:/ && d == "" { d = $3 }
		END { print s + 0, d + 0 }') "$2"
	case " $3 " in
	*" samples_all=$1 "*" records_all=$2 "*) return 0 ;;
	esac
	echo "# perf report --stats: $1 samples, $2 deferred records; e2e_records: $3"
	return 1
}

# perf report -D, read by awk, gives the same figures as e2e_records.
# $1: perf.data, $2: t0, $3: t1, $4: mode, $5: e2e_records' figures.
check_dump() {
	perf report --no-inline -D -i "$1" >"$1.dump" 2>"$1.err" ||
		{ echo "# perf report -D failed:"; sed 's/^/# /' "$1.err"; return 1; }
	dump=$(analyse "$1.dump" "$2" "$3" "$4")
	rm -f "$1.dump"
	if [ "$dump" != "$5" ]; then
		echo "# perf report -D: $dump"
		echo "# e2e_records:    $5"
		return 1
	fi
	echo "# $c $4: perf report -D gives the same figures as e2e_records"
}

for spec in $CASES; do
	IFS=: read -r c f kind spe ms <<EOF
$spec
EOF
	n=$((n + 1))
	sleep 0.2
	if [ "$kind" = sys ]; then
		plan=$("$W" plan sys "$spe" "$f" "$ms")
	else
		plan=$("$W" plan cpu "$ms")
	fi || { echo "not ok $n $c: e2e_workload plan failed"; fail=1; continue; }
	bad=0
	out="# $c: $f Hz, work: e2e_workload $plan"
	for m in none fp defer; do
		# shellcheck disable=SC2086	# $plan: the workload's arguments
		l=$(run "$c" "$f" "$m" $plan) || bad=1
		out="$out
$l"
	done
	echo "$out"
	# All three runs measured, samples taken, nothing lost or throttled,
	# and in the defer run every sample has a cookie and every sampled
	# entry exactly one deferred record.
	[ "$(echo "$out" | grep -c '^BENCH_E2E ')" -eq 3 ] || bad=1
	for k in samples deferred entries; do
		echo "$out" | grep -q " $k=0 " && bad=1
	done
	for k in lost throttled nocookie norecord multirecord; do
		echo "$out" | grep -q " $k=[1-9]" && bad=1
	done
	if [ $bad -eq 0 ]; then
		echo "ok $n $c: none, fp and fp,defer measured"
	else
		echo "not ok $n $c: a run failed, perf disagrees with e2e_records, no samples, or records lost, throttled or missing"
		fail=1
	fi
done

restore
echo "# CPUs online again: $(cat /sys/devices/system/cpu/online)"
rm -rf "$T"
exit $fail
