#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The real perf tool with deferred user callchains, twice:
#   task: perf record --call-graph fp,defer -- dc_workload      (per task)
#   all:  perf record -a --call-graph fp,defer -- dc_workload   (per CPU)
# then checks, from perf's own output (for "all": the samples of comm
# dc_workload only), that
#   1. samples were recorded, every one of them deferred (perf script
#      --no-merge-callchains shows its cookie) except those taken while
#      the task was already exiting, and PERF_RECORD_CALLCHAIN_DEFERRED
#      records were written;
#   2. perf script merges them: every sample whose first user frame is
#      workload_leaf shows the whole chain
#      workload_leaf workload_c workload_b workload_a workload main
#      (without workload_c where the leaf has no frame: see below);
#   3. merged samples show their kernel part too;
#   4. perf script --no-merge-callchains shows the separate DEFERRED
#      CALLCHAIN records, and every sample's cookie has a record with the
#      same cookie and tid, and every record has a sample; the one
#      exception, upstream's exit loss (per task on the C kernel only), is
#      identified by its cookie: perf also records the raw_syscalls:sys_enter
#      tracepoint of exit_group() (id 231) with the same deferred callchain,
#      so the task's last kernel entry has a known cookie, and exactly the
#      cpu-clock samples of that cookie may lack their record there;
#   5. perf report --stdio --no-children attributes workload_leaf, and
#      every kernel function entered from it, to the full user chain.
# It also prints the distinct merged user stacks taken inside workload(),
# one per line, sorted, with its sample count, as "# STACK perf-task: N: ..."
# / "# STACK perf-all: N: ...",
# for comparing the logs of two kernels.  Output is TAP.

T=${TMPDIR:-/tmp}/perf_defer.$$
mkdir -p "$T"
DIR=$(dirname "$0")
BIN=$DIR/dc_workload
NR_MODES=2
WORK_MS=1000
MAX_WORK_MS=4000
# compare-stacks.py's MIN_SAMPLES is 200 a session: twice that, so that
# its check is not at the edge.
WANT_SAMPLES=400
TESTS_PER_MODE=5
# The sampling event and the exit_group() tracepoint that marks the
# task's last kernel entry (see 4. above).
EV=cpu-clock/freq=4000/
TP=raw_syscalls:sys_enter
TP_FILTER='id == 231'
# Which kernel (the guest's variant=c|rust|c-debug|rust-debug), without
# the -debug suffix: the upstream exit-path limit applies to c only.
KVARIANT=$(sed -n 's/.*variant=\([a-z]*\).*/\1/p' /proc/cmdline)
n=0 fail=0
ok() { n=$((n + 1)); echo "ok $n $*"; }
nok() { n=$((n + 1)); fail=1; echo "not ok $n $*"; }
skip_rest() {	# $1: tests of the mode still to report
	i=0
	while [ $i -lt "$1" ]; do
		n=$((n + 1)); i=$((i + 1))
		echo "not ok $n # SKIP $MODE: perf record failed"
	done
}

# Where the leaf has no frame (before push %rbp; mov %rsp,%rbp, and at its
# ret), the frame-pointer walk skips its direct caller, workload_c: the
# documented limit of frame-pointer unwinding.  The leaf's size (for the
# ret offset) comes from nm at build time.
size=$(cat "$DIR/dc_workload.leaf-size")
# The whole merged user stack, where the walk ends: main and the frame it
# returns to (see DC_MAIN_FRAMES in dc_util.h).
want=" workload_leaf workload_c workload_b workload_a workload main __libc_start_call_main"
want_fl=" workload_leaf workload_b workload_a workload main __libc_start_call_main"
# The kernel frames of the exit path: a sample there either has no cookie
# (PF_EXITING: perf unwinds the user stack in place) or, per task on
# upstream 7.3, a cookie whose record is never written (the task's events
# are gone before its pending unwind runs in do_exit).
exit_re=' (do_exit|do_group_exit|__do_sys_exit_group|__x64_sys_exit_group)( |$)'

echo "TAP version 13"
echo "1..$((NR_MODES * TESTS_PER_MODE))"
# The tracepoint needs tracefs.
if [ ! -d /sys/kernel/tracing/events ]; then
	mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
fi
if [ ! -d /sys/kernel/tracing/events/raw_syscalls/sys_enter ]; then
	echo "# no $TP tracepoint (tracefs, CONFIG_TRACEPOINTS): the exit entry cannot be identified"
fi

check_mode() {
	MODE=$1
	D=$T/$MODE
	mkdir -p "$D"
	if [ "$MODE" = all ]; then
		a=-a comm=dc_workload
	else
		a= comm=
	fi
	# The workload runs WORK_MS milliseconds; while a session has fewer
	# than WANT_SAMPLES samples of it (under TCG a vCPU can be starved),
	# it is recorded again for twice as long, up to MAX_WORK_MS, and the
	# last session is the one checked: compare-stacks.py needs enough
	# samples of each kernel to compare distributions.
	work=$WORK_MS
	while :; do
		# shellcheck disable=SC2086	# $a: an option or nothing
		if ! perf record -q --no-bpf-event $a -e "$EV" -e "$TP" --filter "$TP_FILTER" \
			--call-graph fp,defer -o "$D/perf.data" -- "$BIN" $work \
			>"$D/record.out" 2>&1; then
			cat "$D/record.out"
			nok "$MODE: perf record $a --call-graph fp,defer failed"
			skip_rest $((TESTS_PER_MODE - 1))
			return
		fi
		got=$(perf script -i "$D/perf.data" -F comm,event 2>/dev/null |
			awk '$1 == "dc_workload" && $2 ~ /^cpu-clock/' | wc -l)
		[ "$got" -lt $WANT_SAMPLES ] && [ $((work * 2)) -le $MAX_WORK_MS ] || break
		echo "# $MODE: $got samples of dc_workload in a $work ms run, fewer than $WANT_SAMPLES: recording again for $((work * 2)) ms"
		work=$((work * 2))
	done
	echo "# $MODE: $got samples of dc_workload in a $work ms run"

	perf report -D -i "$D/perf.data" >"$D/dump.txt" 2>/dev/null
	samples=$(grep -c 'PERF_RECORD_SAMPLE' "$D/dump.txt")
	deferred=$(grep -c 'PERF_RECORD_CALLCHAIN_DEFERRED' "$D/dump.txt")
	lost=$(grep -c 'PERF_RECORD_LOST' "$D/dump.txt")

	# Unmerged view: one block per sample (its user part is only its
	# cookie, a "(cookie)" entry) and one "DEFERRED CALLCHAIN [cookie: N]"
	# block per deferred record.  Block headers are "comm tid ..." (a
	# record's may be indented), frames are indented lines.  Records
	# are matched by tid and cookie whatever their comm (a sample in
	# execve still has the old one).
	perf script -i "$D/perf.data" --no-inline --no-merge-callchains \
		-F comm,tid,event,ip,sym >"$D/unmerged.txt" 2>/dev/null
	awk -v comm="$comm" -v exit_re="$exit_re" -v tp="$TP:" '
	function flush(  ours, ex) {
		if (!blk) return
		ours = comm == "" || c == comm
		if (isrec) {
			rec[tid " " ck] = 1
			drec_all++
			if (ours) {
				drec++
				recs[drec] = tid " " ck
			}
		} else {
			samples_all++
			if (ck != "") used[tid " " ck] = 1
			if (ours && ev == tp) {
				# exit_group() entered: the cookie of the last entry of the task.
				ntp++
				tpkey[ntp] = tid " " ck
				if (ck != "") exitck[tid " " ck] = 1
			} else if (ours) {
				ex = body ~ exit_re
				nq++
				qtid[nq] = tid
				qck[nq] = ck
				qbody[nq] = body
				if (ck != "") {
					marked++
				} else if (ex) {
					exiting++
				} else {
					other++
					if (other <= 3) print "# not deferred: " c " " tid ":" body > "/dev/stderr"
				}
			}
		}
		blk = 0; isrec = 0; body = ""; ck = ""; ev = ""
	}
	/^[ \t]*$/ { flush(); next }
	/^[ \t]/ && !/DEFERRED CALLCHAIN \[cookie: / {
		if ($2 == "(cookie)") ck = $1
		else body = body " " $2
		next
	}
	{
		flush()
		blk = 1; c = $1; tid = $2; ev = $3
		if (index($0, "DEFERRED CALLCHAIN [cookie: ")) {
			isrec = 1
			ck = $0
			sub(/.*\[cookie: /, "", ck)
			sub(/\].*/, "", ck)
		}
	}
	END {
		flush()
		for (i = 1; i <= nq; i++) {
			if (qck[i] == "") continue
			if ((qtid[i] " " qck[i]) in rec) { matched++; continue }
			if ((qtid[i] " " qck[i]) in exitck) { exitnorec++; continue }
			norec++
			if (norec <= 3) print "# sample tid/cookie " qtid[i] " " qck[i] " has no DEFERRED CALLCHAIN record:" qbody[i] > "/dev/stderr"
		}
		for (i = 1; i <= drec; i++) {
			if (recs[i] in used) continue
			orphan++
			if (orphan <= 3) print "# DEFERRED CALLCHAIN tid/cookie " recs[i] " has no sample" > "/dev/stderr"
		}
		for (i = 1; i <= ntp; i++) {
			print "# exit_group() entered: tid/cookie " tpkey[i] ((tpkey[i] in rec) ? ", with" : ", without") " its DEFERRED CALLCHAIN record" > "/dev/stderr"
			tprec += tpkey[i] in rec
		}
		printf "%d %d %d %d %d %d %d %d %d %d %d %d\n", samples_all, marked, exiting, other,
			drec_all, drec, matched, exitnorec, norec, orphan, ntp + 0, tprec + 0
	}' "$D/unmerged.txt" >"$D/counts.txt"
	read -r samples_all marked exiting other drec_all drec matched exitnorec norec \
		orphan ntp tprec <"$D/counts.txt"
	echo "# $MODE: perf report -D: $samples samples, $deferred PERF_RECORD_CALLCHAIN_DEFERRED, $lost PERF_RECORD_LOST"
	echo "# $MODE: perf script --no-merge-callchains: $samples_all samples, $drec_all DEFERRED CALLCHAIN records; ${comm:-all comms}: $marked samples with a cookie, $exiting taken in the exit path without one (task exiting, not deferred), $other other, $drec DEFERRED CALLCHAIN records"
	# A sample taken after the task started exiting is not deferred (the
	# request fails with PF_EXITING and perf falls back to in-place user
	# unwinding); every other sample must be.
	if [ "$samples" -gt 20 ] && [ "$deferred" -gt 0 ] && [ "$samples_all" -eq "$samples" ] &&
		[ "$drec_all" -eq "$deferred" ] && [ "$drec" -gt 0 ] && [ "$other" -eq 0 ] &&
		[ "$marked" -gt 20 ]; then
		ok "$MODE: perf record: $marked of $((marked + exiting)) samples deferred with a cookie ($exiting in the exit path), $drec PERF_RECORD_CALLCHAIN_DEFERRED (${comm:-all comms})"
	else
		nok "$MODE: perf record: $samples samples ($samples_all in perf script), $marked deferred, $exiting exiting, $other neither; $deferred/$drec_all/$drec deferred records"
	fi

	# Merged view: one stack per block; blocks are separated by blank
	# lines.  Print, per sample, "comm|offset of its first user frame in
	# its function|kernel frames|symbols of its user frames".
	# (The exit_group() tracepoint's sample is left out.)
	perf script -i "$D/perf.data" --no-inline -F comm,tid,event,ip,sym,symoff,dso \
		>"$D/script.txt" 2>"$D/script.err"
	awk -v tp="$TP:" '
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
	function flush() {
		if (blk) print c "|" off + 0 "|" nk + 0 "|" stack "|" astack
		blk = 0; stack = ""; astack = ""; off = ""; nk = 0
	}
	/^[ \t]*$/ { flush(); next }
	/^[^ \t]/ { flush(); blk = $3 != tp; c = $1; next }
	!blk { next }
	/kernel.kallsyms/ { nk++; next }
	{
		split($2, a, "+")
		if (stack == "") off = hex(a[2])
		stack = stack " " a[1]
		# By address (the same static binary at the same addresses on
		# both kernels): the sampled frame by its function, every
		# caller by its return address.
		astack = astack " " (astack == "" ? a[1] : $1)
	}
	END { flush() }' "$D/script.txt" >"$D/stacks.txt"
	awk -F'|' -v comm="$comm" -v size="$size" -v want="$want" -v want_fl="$want_fl" '
	comm != "" && $1 != comm { next }
	{ total++; off = $2; s = $4 }
	$3 > 0 { kern++ }
	s !~ /^ workload_leaf / { next }
	{
		leaf++
		fl = off < 4 || off == size - 1
		frameless += fl
		if (s == (fl ? want_fl : want)) {
			exact++
			if ($3 > 0) kleaf++
		} else if (bad++ < 3) print "# bad (offset " off "):" s > "/dev/stderr"
	}
	END { printf "%d %d %d %d %d %d\n", total, leaf, exact, frameless, kern, kleaf }' \
		"$D/stacks.txt" >"$D/leaf.txt"
	read -r total leaf exact frameless kern kleaf <"$D/leaf.txt"
	echo "# $MODE: perf script: $total samples${comm:+ of $comm}, $leaf with the leaf as first user frame ($frameless at its frameless entry/exit), $exact with the exact chain"
	if [ "$leaf" -gt 0 ] && [ "$exact" -eq "$leaf" ] && [ $((leaf * 2)) -ge "$total" ]; then
		ok "$MODE: perf script merged stacks: all $leaf leaf samples are$want (without workload_c in the $frameless frameless ones)"
	else
		nok "$MODE: perf script merged stacks: $exact of $leaf leaf samples are$want"
	fi
	# For comparing two kernels: the distinct merged user stacks taken
	# inside workload() (the rest, start-up and exit, is left to chance).
	# "# STACK perf-MODE: COUNT: STACK", COUNT samples with that stack.
	awk -F'|' -v comm="$comm" '
	(comm == "" || $1 == comm) && ($4 " ") ~ / workload / { print $4 }' \
		"$D/stacks.txt" | sort | uniq -c |
		awk -v mode="$MODE" '{ n = $1; $1 = ""; print "# STACK perf-" mode ": " n ":" $0 }'
	# And every sample of the comm, truncated stacks, start-up and exit
	# included, keyed by address, with whether it was taken in the kernel
	# (K) or in user space (U): "# ASTACK perf-MODE: COUNT: K|U ADDRESSES".
	# compare-stacks.py compares the two kernels' distributions of these.
	awk -F'|' -v comm="$comm" '
	comm == "" || $1 == comm { print ($3 > 0 ? "K" : "U") ($5 == "" ? " -" : $5) }' \
		"$D/stacks.txt" | sort | uniq -c |
		awk -v mode="$MODE" '{ n = $1; $1 = ""; print "# ASTACK perf-" mode ": " n ":" $0 }'
	others=$(awk -F'|' -v comm="$comm" '
	(comm == "" || $1 == comm) && ($4 " ") !~ / workload / { print $4 }' "$D/stacks.txt" |
		sort -u | wc -l)
	echo "# $MODE: $others other distinct user stacks (start-up, exit) not listed"

	# Every merged sample also shows its kernel part (the workload is
	# mostly in getppid/clock_gettime system calls).
	if [ "$kern" -gt 0 ] && [ "$kleaf" -gt 0 ]; then
		ok "$MODE: perf script shows kernel frames merged with user frames ($kern samples, $kleaf of them entered from the leaf with its exact chain)"
	else
		nok "$MODE: perf script shows no kernel frames merged with the leaf's chain ($kern samples with kernel frames, $kleaf from the leaf)"
	fi

	# The cookies in the unmerged view: every sample's has a record of
	# the same cookie and tid, every record a sample.  Per task, upstream
	# 7.3 writes no record for the task's last kernel entry, exit_group()
	# (the task's events are gone before its pending unwind runs): the
	# samples with the cookie of the exit_group() tracepoint's sample are
	# only counted there, on the C kernel.  The Rust kernel runs a pending
	# unwind before perf detaches the task's events
	# (docs/deviations.md), and per CPU (-a) the events outlive the task: no
	# exception, the exit entry has its record.
	echo "# $MODE: cookies: $marked samples with a cookie, $matched with a DEFERRED CALLCHAIN record of the same cookie and tid, $exitnorec of the exit_group() entry without one, $norec others without one; $drec records, $orphan without a sample; $ntp exit_group() entries, $tprec of them with their record"
	if [ "$MODE" = all ] || [ "$KVARIANT" != c ]; then
		exit_ok=0 tp_ok=$ntp
	else
		exit_ok=$exitnorec tp_ok=$tprec
	fi
	if [ "$lost" -eq 0 ] && [ "$matched" -gt 0 ] && [ "$norec" -eq 0 ] &&
		[ "$exitnorec" -eq "$exit_ok" ] && [ "$orphan" -eq 0 ] &&
		[ $((matched + exitnorec)) -eq "$marked" ] && [ "$ntp" -eq 1 ] &&
		[ "$tprec" -eq "$tp_ok" ]; then
		ok "$MODE: perf script --no-merge-callchains: all $matched sample cookies have their DEFERRED CALLCHAIN record (same tid), all $drec records a sample; exit_group() entry: $tprec record, $exitnorec samples without one (upstream exit loss, C per task only)"
	else
		nok "$MODE: perf script --no-merge-callchains: $norec samples without a record ($exitnorec in the exit_group() entry, allowed $exit_ok), $orphan records without a sample, $lost PERF_RECORD_LOST, $ntp exit_group() entries ($tprec with their record, $tp_ok expected)"
	fi

	# perf report, one folded chain per line under each entry, all of
	# them (threshold 0): the leaf's entry and every kernel function
	# entered from it must carry the full user chain (the frameless
	# variant only if perf script saw such samples).
	perf report -i "$D/perf.data" --stdio --no-inline --no-children \
		--sort comm,dso,sym -g folded,0 >"$D/report.txt" 2>"$D/report.err"
	# (Only the sampling event's section: "# Samples: N of event 'EV'".)
	awk -v comm=dc_workload -v fl_ok="$frameless" -v sec="event '$EV'" '
	BEGIN {
		full = "workload_leaf;workload_c;workload_b;workload_a;workload;main;__libc_start_call_main"
		fl = "workload_leaf;workload_b;workload_a;workload;main;__libc_start_call_main"
	}
	/^# Samples: / { insec = index($0, sec) > 0; nsec += insec; next }
	/^#/ || !insec { next }
	/^ +[0-9.]+%/ {
		e = $1; sub(/%/, "", e)
		ours = $2 == comm
		inleaf = ours && $4 == "[.]" && $5 == "workload_leaf"
		if (inleaf) { entry = e + 0; found++ }
		next
	}
	/^[0-9.]+% / && ours {
		p = $1; sub(/%/, "", p)
		chain = substr($0, index($0, " ") + 1)
		if (inleaf) {
			n++
			if (chain == full) fullpct += p
			else if (fl_ok && chain == fl) flpct += p
			else if (bad++ < 3) print "# report: workload_leaf " p "%: " chain > "/dev/stderr"
			next
		}
		i = index(chain, ";workload_leaf")
		if (!i) next
		kchains++
		kpct += p
		rest = substr(chain, i + 1)
		if (rest != full && !(fl_ok && rest == fl) && kbad++ < 3)
			print "# report: kernel entry " p "%: " chain > "/dev/stderr"
	}
	END {
		d = fullpct + flpct - entry
		if (nsec != 1) found = 0
		printf "%d %.2f %.2f %.2f %d %d %d %.2f %d %d\n", found, entry, fullpct, flpct, n, bad,
			kchains, kpct, kbad, (d < 0 ? -d : d) <= 0.01 * (n + 1)
	}' "$D/report.txt" >"$D/rep.txt"
	read -r found entry fullpct flpct nchains rbad kchains kpct kbad covered <"$D/rep.txt"
	echo "# $MODE: perf report: workload_leaf $entry% in $nchains chains: $fullpct% workload_leaf <- workload_c <- workload_b <- workload_a <- workload <- main <- __libc_start_call_main, $flpct% without workload_c (frameless), $rbad others; $kchains kernel chains entered from the leaf ($kpct%), $kbad not with the full chain"
	if [ "$found" -eq 1 ] && [ "$rbad" -eq 0 ] && [ "$covered" -eq 1 ] &&
		[ "$nchains" -gt 0 ] && [ "$kchains" -gt 0 ] && [ "$kbad" -eq 0 ] &&
		awk -v f="$fullpct" 'BEGIN { exit !(f > 0) }'; then
		ok "$MODE: perf report --no-children: workload_leaf ($entry%) and the $kchains kernel chains entered from it all attributed to workload_leaf <- workload_c <- workload_b <- workload_a <- workload <- main <- __libc_start_call_main ($flpct% frameless)"
	else
		nok "$MODE: perf report --no-children: workload_leaf entries $found, $rbad bad chains of $nchains (full $fullpct% + frameless $flpct% vs $entry%), $kbad of $kchains kernel chains without the full user chain"
	fi
}

check_mode task
check_mode all
rm -rf "$T"
exit $fail
