#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Real programs: Debian's own binaries and libraries, built without frame
# pointers and stripped (copied into the guest from the build machine by
# build-initramfs.sh), profiled by the real perf tool.  Two unwinders:
#   defer: perf record -e cpu-clock -F 4000 --call-graph fp,defer
#          (the user stack walked by the kernel in the deferred task_work,
#          by the objects' .eh_frame tables: the walk under test);
#   dwarf: perf record -e cpu-clock -F 4000 --call-graph dwarf
#          (a copy of the user stack in every sample, unwound afterwards
#          by perf's own libdw unwinder: the independent oracle).
# Programs: perl running a recursive sub and a sort with a Perl comparator
# (pp_sort calling back into the interpreter), gzip -9 and bzip2 -9
# compressing a mix of machine code and text (bzip2's work is in
# libbz2.so), grep -E with a back-referencing pattern (glibc's
# backtracking regex matcher), and python3.11 (non-PIE) running a
# recursive function and a sort whose key calls back into the
# interpreter.  Each program runs, with the same input:
#   1. under defer alone and 2. under dwarf alone: the size of perf.data
#      per sample and the time perf report takes (for dwarf, libdw
#      unwinding every sample);
#   3. under both at once, two cpu-clock events at 4 kHz in one session
#      ("walk": fp,defer; "oracle": dwarf): the samples compared.  One
#      execution sampled by both unwinders, so that the oracle sees the
#      program's phases in the same proportions as the walk.  (Separate
#      runs do not: the deferred walk's own time is charged to the task,
#      and at start-up, where every pc is new to the walk, it multiplies
#      the samples; a first version compared separate runs and the
#      oracle had never sampled 1-9% of the walk's steps, all of them
#      start-up code.)  Another session follows, up to SESSIONS, while
#      the walk has fewer than WANT_MULTI samples with more than one frame
#      (sample counts under TCG vary tenfold from run to run).
# The debug kernels (variant=*-debug) run only the walk on each program
# (perf record --call-graph fp,defer), so that KASAN, lockdep... watch it
# on real tables; the comparison is the test kernel's.
#
# This script only records and reports; the comparison needs each
# object's FDE ranges and code, so it runs on the host,
# scripts/compare-real.py, from what this prints: for each session of
# both, between
#   #### BEGIN real <program> both gz.b64
#   #### END real <program> both
# the gzip'ed, base64'ed list of distinct user stacks (see fold below);
# "# REAL <program> <defer|dwarf|both>: key=value..." lines of figures;
# "# REAL md5 <sum> <path>" for every object the stacks name; "# table
# walk: ..." the kernel's table-walk counters at the end.
#
# TAP: 1: the table walk is on by default (/proc/sys/kernel/unwind_user_tables
# reads 1); then for each program: the runs alone worked, and the
# sessions of both worked and gave at least MIN_MULTI samples with more
# than one user frame to each unwinder (debug kernels: one test per
# program, the walk's samples).  A kernel without the unwind tables
# switch (the upstream C kernel walks frame pointers only) reports test 1
# as SKIP and runs nothing: there is no table walk to compare.
T=${TMPDIR:-/tmp}/perf_real
TABLES=/proc/sys/kernel/unwind_user_tables
FREQ=4000
MIN_MULTI=200
# Sessions of both unwinders per program: another while the walk has fewer
# than WANT_MULTI samples with more than one user frame.
SESSIONS=3
WANT_MULTI=1000
# Bytes of user stack the dwarf samples copy (perf's default is 8192):
# enough for the whole stack of these programs, so that the oracle is not
# cut short.  grep's needs more: glibc's build_trtable() has an 18,656-byte
# frame (a DWARF unwinder with 16 KiB of stack stops there, and with 32 KiB
# 29 of 1,269 samples in one run still did): perf's largest copy, 65,528.
DWARF_STACK=16384
DWARF_STACK_grep=65528
# perf's ring buffer, pages per CPU: a dwarf sample is 16 or 32 KiB, and
# under TCG perf does not always drain it in time (what is lost is counted
# and printed; the samples that remain are compared).
MMAP_PAGES=16384
PROGRAMS="perl gzip bzip2 grep python3.11"
# Each program's output goes to a file, $p.out, never to /dev/null: GNU
# grep stops at its first match when its output is /dev/null (even with
# -c), and its profile would be start-up and one line of input.
# The inputs and command lines (real_programs.sh): about a second of guest
# CPU each under TCG.  grep reads all of its input now that its output is
# a file: 400 lines, not real_programs.sh's 6,000 (sized when it stopped
# at the first match), keep it near that second and its dwarf samples
# (64 KiB each) within the guest's memory (1,500 lines: 14,224 samples
# by fp,defer, 3.5 s, and 418 MB of perf.data for one session of both).
GREP_LINES=${GREP_LINES:-400}
. "$(dirname "$0")/real_programs.sh"
# Debian's mawk where build-initramfs.sh copied it: much faster than
# busybox awk over the tens of thousands of lines of a session.
AWK=awk
[ -x /usr/bin/mawk ] && AWK=/usr/bin/mawk
n=0 fail=0
ok() { n=$((n + 1)); echo "ok $n $*"; }
nok() { n=$((n + 1)); fail=1; echo "not ok $n $*"; }
now() { cut -d' ' -f1 /proc/uptime; }
since() { echo "$1 $(now)" | awk '{ printf "%.2f", $2 - $1 }'; }

echo "TAP version 13"
if [ ! -e "$TABLES" ]; then
	echo "1..1"
	echo "# no $TABLES: this kernel walks user stacks by frame pointers only"
	ok "# SKIP no unwind tables in this kernel: no table walk to compare with perf's DWARF unwinder"
	exit 0
fi
# The debug kernels (KASAN, lockdep...: several times slower) only run
# the walk on each program, to have the detectors watch it on real
# tables; the comparison is the test kernel's.
case $(cat /proc/cmdline) in
*variant=*-debug*) DEBUG=1 ;;
*) DEBUG= ;;
esac
t_start=$(now)
set -- $PROGRAMS
if [ -n "$DEBUG" ]; then
	echo "1..$((1 + $#))"
	echo "# debug kernel: the table walk alone on each program (no comparison)"
else
	echo "1..$((1 + 2 * $#))"
fi
perf version --build-options 2>/dev/null | grep -E ' (dwarf|dwarf-unwind|libdw-dwarf-unwind):' |
	sed 's/^ */# perf: /'

was=$(cat "$TABLES")
if [ "$was" = 1 ]; then
	ok "unwind tables on by default ($TABLES reads 1)"
else
	nok "unwind tables off by default ($TABLES reads '$was', 1 expected); switched on for the runs"
	echo 1 >"$TABLES"
fi

rm -rf "$T"
mkdir -p "$T"
cd "$T" || exit 1

real_inputs

# fold COMM <perf script --no-merge-callchains output >stacks 2>counts
# One line per distinct user stack:
#   S <kind> <comm> <samples> <in kernel> <walks> <id>+<offset>...
# kind D: a sample of the walk event joined with the deferred record of
#   its cookie (walks: how many records, that is kernel entries); N: a
#   walk sample whose cookie has no record; I: a walk sample whose user
#   stack perf took in place (not deferred: the task was exiting); W: a
#   sample of the oracle event, unwound by perf's libdw;
#   O <id> <path>: an object, by number;
#   K <kind> <samples> <kernel functions>: where the samples without a
#   user stack (E: walk, F: oracle), those of the walk taken after their
#   own record (L: perf script's own merge only joins a sample with a
#   record that follows it, so these are joined here, by tid and cookie)
#   and those of kinds N and I were taken.
# Frames are leaf first, each object + file offset as perf script's dsoff
# prints it, ?+<address> where perf knows no object.  stderr: "walk
# samples, of COMM, with more than one user frame; oracle the same; walk
# samples after their record, without a record, without a user stack;
# oracle samples without one".
fold() {	# comm
	$AWK -v comm="$1" '
	function flush(  key) {
		if (!blk) return
		if (isrec) {
			rec[tid " " ck] = u
			seen[tid " " ck] = 1
		} else if (ev == "oracle") {
			all_o++
			if (c == comm) mine_o++
			if (u != "") {
				key = "W " c " " u
				cnt[key]++; if (nk) kin[key]++; wk[key] = 0
				if (c == comm && nu > 1) multi_o += 1
			} else {
				nouser_o++; kk["F " ks]++
			}
		} else {
			all_w++
			if (c == comm) mine_w++
			if (ck != "") {
				key = tid " " ck " " c
				n[key]++
				if (nk) nin[key]++
				if ((tid " " ck) in seen) { late++; kk["L " ks]++ }
			} else if (u != "") {
				key = "I " c " " u
				cnt[key]++; if (nk) kin[key]++; wk[key] = 0
				kk["I " ks]++
			} else {
				nouser_w++; kk["E " ks]++
			}
		}
		blk = 0
	}
	/^[ \t]*$/ { flush(); next }
	blk && /\)$/ {
		a = $1
		match($0, /\([^()]*\)$/)
		dso = substr($0, RSTART + 1, RLENGTH - 2)
		mid = substr($0, 1, RSTART - 1)
		if (mid ~ /\(cookie\) *$/) { ck = a; next }
		if (dso == "[kernel.kallsyms]" || a ~ /^ffff/) {
			nk++
			if (nk <= 4) ks = ks (nk > 1 ? "<" : "") $2
			next
		}
		j = index(dso, "+0x")
		if (j > 0) {
			path = substr(dso, 1, j - 1)
			if (!(path in id)) id[path] = ++nid
			u = u " " id[path] "+" substr(dso, j + 3)
		} else
			u = u " ?+" a
		nu++
		next
	}
	{
		flush()
		blk = 1; c = $1; tid = $2; ev = $3; sub(/:$/, "", ev)
		nk = 0; ck = ""; u = ""; nu = 0; ks = ""
		isrec = index($0, "DEFERRED CALLCHAIN [cookie: ") > 0
		if (isrec) { ck = $0; sub(/.*\[cookie: /, "", ck); sub(/\].*/, "", ck) }
	}
	END {
		flush()
		# Each walk sample with a cookie gets the stack of its record.
		for (key in n) {
			split(key, f, " ")
			t = f[1] " " f[2]
			if (t in rec) {
				k = "D " f[3] rec[t]; wk[k]++
				if (f[3] == comm && split(rec[t], g, " ") > 1) multi_w += n[key]
			} else {
				k = "N " f[3]; wk[k] = 0
				norec += n[key]
			}
			cnt[k] += n[key]; kin[k] += nin[key]
		}
		for (p in id) print "O", id[p], p
		for (k in cnt) {
			split(k, f, " ")
			print "S", f[1], f[2], cnt[k], kin[k] + 0, wk[k] + 0, substr(k, length(f[1]) + length(f[2]) + 3)
		}
		for (k in kk) { split(k, f, " "); print "K", f[1], kk[k], substr(k, length(f[1]) + 2) }
		printf "%d %d %d %d %d %d %d %d %d %d\n", all_w, mine_w, multi_w, all_o, mine_o, multi_o,
			late, norec, nouser_w, nouser_o > "/dev/stderr"
	}'
}

# stats FILE: "samples deferred lost" as perf report --stats counts them.
stats() {
	perf report -i "$1" --stats 2>/dev/null | awk '
		$1 == "SAMPLE" && $2 == "events:" { s = $3 }
		$1 == "CALLCHAIN_DEFERRED" && $2 == "events:" { d = $3 }
		$1 == "LOST" && $2 == "events:" { l = $3 }
		$1 == "LOST_SAMPLES" && $2 == "events:" { l += $3 }
		END { print s + 0, d + 0, l + 0 }'
}

profile() {	# program
	p=$1
	set -- $(real_cmd "$p")
	rec="perf record -q --no-bpf-event --no-buildid -m $MMAP_PAGES -F $FREQ"
	# (python3.11: no such variable name; the default.)
	case $p in
	*[!a-z0-9_]*) ds=$DWARF_STACK ;;
	*) eval "ds=\${DWARF_STACK_$p:-$DWARF_STACK}" ;;
	esac
	# 1, 2: each unwinder alone.
	alone=ok
	for mode in defer dwarf; do
		case $mode in
		defer) cg=fp,defer ;;
		dwarf) cg=dwarf,$ds ;;
		esac
		t0=$(now)
		if ! $rec -e cpu-clock --call-graph $cg -o $p.$mode.data -- "$@" \
			>$p.out 2>$p.$mode.err; then
			cat $p.$mode.err
			alone="perf record --call-graph $cg failed"
			continue
		fi
		rs=$(since "$t0")
		echo "# $p $mode: $(wc -c <$p.out) bytes of output$([ $p != grep ] ||
			echo ": $(cat $p.out) matching lines of $GREP_LINES")"
		t0=$(now)
		perf report -i $p.$mode.data --stdio --no-inline --no-children >/dev/null 2>&1
		ps=$(since "$t0")
		read -r s d l <<-EOF
		$(stats $p.$mode.data)
		EOF
		b=$(wc -c <$p.$mode.data)
		echo "# REAL $p $mode: samples=$s deferred=$d lost=$l data_bytes=$b" \
			"bytes_per_sample=$((b / (s > 0 ? s : 1)))" \
			"record_s=$rs report_s=$ps report_ms_per_sample=$(echo "$ps $s" |
			awk '{ printf "%.2f", 1000 * $1 / ($2 > 0 ? $2 : 1) }')"
		[ "$s" -gt 0 ] || alone="perf record --call-graph $cg: no samples"
		rm -f $p.$mode.data
	done
	if [ "$alone" = ok ]; then
		ok "$p alone: perf record --call-graph fp,defer, then dwarf: samples, bytes and perf report time printed"
	else
		nok "$p alone: $alone"
	fi
	# 3: both in one session; again (up to SESSIONS times) while the
	# walk has fewer than WANT_MULTI samples with more than one frame
	# (sample counts under TCG vary tenfold between runs).
	i=0 tw=0 to=0 tl=0
	while [ $i -lt $SESSIONS ] && [ $tw -lt $WANT_MULTI ]; do
		i=$((i + 1))
		t0=$(now)
		if ! $rec --call-graph fp,defer -e cpu-clock/name=walk/ \
			-e cpu-clock/name=oracle,call-graph=dwarf,stack-size=$ds/ \
			-o $p.both.data -- "$@" >$p.out 2>$p.both.err; then
			cat $p.both.err
			nok "$p both: perf record of both unwinders failed"
			return
		fi
		rs=$(since "$t0")
		read -r s d l <<-EOF
		$(stats $p.both.data)
		EOF
		t0=$(now)
		perf script -i $p.both.data --no-inline --no-merge-callchains \
			-F comm,tid,event,ip,sym,dso,dsoff 2>$p.both.serr | fold "$p" \
			2>$p.both.count >$p.both.stacks
		ss=$(since "$t0")
		read -r all_w mine_w multi_w all_o mine_o multi_o late norec nouser_w nouser_o \
			<$p.both.count
		echo "# REAL $p both: session=$i lost=$l data_bytes=$(wc -c <$p.both.data)" \
			"walk_samples=$all_w walk_of_program=$mine_w walk_multi_frame=$multi_w" \
			"oracle_samples=$all_o oracle_of_program=$mine_o oracle_multi_frame=$multi_o" \
			"after_their_record=$late without_record=$norec walk_without_user_stack=$nouser_w" \
			"oracle_without_user_stack=$nouser_o stacks=$(grep -c '^S ' $p.both.stacks)" \
			"record_s=$rs script_s=$ss"
		echo "#### BEGIN real $p both gz.b64"
		gzip -9 -c $p.both.stacks | base64
		echo "#### END real $p both"
		# The objects, so that the host can check it reads the same files.
		# (Not perf's own copies, such as /tmp/perf-vdso.so-*.)
		awk '$1 == "O" && $3 !~ /^\/tmp\// { print $3 }' $p.both.stacks | while read -r o; do
			[ -f "$o" ] && echo "# REAL md5 $(md5sum "$o")"
		done
		tw=$((tw + ${multi_w:-0})) to=$((to + ${multi_o:-0})) tl=$((tl + ${l:-0}))
		rm -f $p.both.data
	done
	if [ $tw -ge $MIN_MULTI ] && [ $to -ge $MIN_MULTI ]; then
		ok "$p both: $tw walk and $to oracle samples with more than one user frame in $i session(s), $tl records lost"
	else
		head -5 $p.both.serr
		nok "$p both: $tw walk and $to oracle samples with more than one user frame in $i session(s) ($MIN_MULTI required each), $tl records lost"
	fi
}

# The table walk alone (debug kernels): perf record --call-graph fp,defer.
walk_only() {	# program
	p=$1
	set -- $(real_cmd "$p")
	if ! perf record -q --no-bpf-event --no-buildid -m $MMAP_PAGES -F $FREQ -e cpu-clock \
		--call-graph fp,defer -o $p.data -- "$@" >$p.out 2>$p.err; then
		cat $p.err
		nok "$p: perf record --call-graph fp,defer failed"
		return
	fi
	perf script -i $p.data --no-inline --no-merge-callchains -F comm,tid,event,ip,sym,dso,dsoff \
		2>/dev/null | fold "$p" 2>$p.count >/dev/null
	read -r all_w mine_w multi_w all_o mine_o multi_o late norec nouser_w nouser_o <$p.count
	echo "# REAL $p walk: samples=$all_w of_program=$mine_w multi_frame=$multi_w" \
		"after_their_record=$late without_record=$norec without_user_stack=$nouser_w"
	if [ "${multi_w:-0}" -ge $MIN_MULTI ]; then
		ok "$p: $mine_w samples, $multi_w with more than one user frame by the table walk"
	else
		nok "$p: only ${multi_w:-0} samples with more than one user frame ($MIN_MULTI required)"
	fi
	rm -f $p.data
}

for p in $PROGRAMS; do
	if [ -n "$DEBUG" ]; then
		walk_only "$p"
	else
		profile "$p"
	fi
done
[ "$was" = 1 ] || echo "$was" >"$TABLES"
if grep -q " /sys/kernel/debug debugfs " /proc/mounts ||
	mount -t debugfs none /sys/kernel/debug 2>/dev/null; then
	[ -r /sys/kernel/debug/unwind_user/stats ] &&
		echo "# table walk: $(tr '\n' ' ' </sys/kernel/debug/unwind_user/stats)"
fi
echo "# perf_real.sh: $(since "$t_start") s"
cd /
rm -rf "$T"
exit $fail
