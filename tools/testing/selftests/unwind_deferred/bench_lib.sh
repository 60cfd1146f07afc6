#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# What make bench's guest scripts (perf_bench.sh, perf_bench_real.sh,
# perf_bench_deep.sh) share: sourced, not run.

# wait_hres: wait up to 10 s for high-resolution timers; 1 if they are not
# active then.  cpu-clock samples at 1 to 10 kHz need them, and the kernel
# turns them on only once it has switched to a fine clocksource (the TSC,
# about 1.4 s after boot here); before that, hrtimers fire on the 4 ms
# tick.
bench_hres() {
	grep -q 'hres_active.*: 1' /proc/timer_list &&
		! grep -q 'hres_active.*: 0' /proc/timer_list
}
wait_hres() {
	_i=0
	while ! bench_hres 2>/dev/null && [ $_i -lt 100 ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
	bench_hres && return 0
	echo "Bail out! high-resolution timers are not active (clocksource:" \
		"$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource))"
	return 1
}

# only_cpu0: take every other online CPU offline, for runs whose
# instruction counts (-icount counts every vCPU's) must be the
# benchmark's alone; BENCH_OFFLINE lists them for cpus_back.  1 (with
# the CPUs it took back online) if one cannot go offline.
BENCH_OFFLINE=
only_cpu0() {
	for _cpu in /sys/devices/system/cpu/cpu[0-9]*; do
		[ "$_cpu" != /sys/devices/system/cpu/cpu0 ] && [ -f "$_cpu/online" ] &&
			[ "$(cat "$_cpu/online")" = 1 ] || continue
		if ! echo 0 >"$_cpu/online"; then
			cpus_back
			echo "Bail out! cannot take ${_cpu##*/} offline for the runs"
			return 1
		fi
		BENCH_OFFLINE="$BENCH_OFFLINE $_cpu"
	done
	return 0
}
cpus_back() {
	for _cpu in $BENCH_OFFLINE; do
		echo 1 >"$_cpu/online"
	done
	BENCH_OFFLINE=
}

# bench_callgraph MODE: perf record's --call-graph for MODE, with the
# unwind tables switched for it ($TABLES: off 0, on, again and cap 1):
# dwarf for dwarf, fp,defer for off, on, again, cap and fp (the C kernel,
# which has no tables).
bench_callgraph() {
	case $1 in
	off) echo 0 >"$TABLES" ;;
	on | again | cap) echo 1 >"$TABLES" ;;
	esac
	case $1 in
	dwarf) echo dwarf ;;
	*) echo fp,defer ;;
	esac
}
