#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the selftests and the guest's initramfs: busybox-static, /init,
# the selftests under /tests, and the perf tool with its shared libraries
# and dynamic loader taken from this machine's root (resolved here, so the
# loader and libc always come from the same glibc).
# Environment: SELFTESTS (the guest's test list, in order; set by the
#   Makefile), SELFTEST_SRC (build the selftests from another copy of
#   tools/testing/selftests/unwind_deferred: it must sit next to a lib.mk),
#   REAL_PROGRAMS (the real programs perf_real.sh profiles; default below).
. "$(dirname "$0")/lib.sh"
SRC=$BUILD/linux
HDR=$BUILD/kernel-c/usr/include
ROOT=$BUILD/initramfs
OUT=$BUILD/initramfs.cpio
REAL_PROGRAMS=${REAL_PROGRAMS:-/usr/bin/perl /usr/bin/gzip /usr/bin/bzip2 /usr/bin/grep /usr/bin/python3.11}
# What Debian's python3.11 reads from its library at start-up with -S -E
# (the rest of what it imports then is frozen into the binary): the
# codec of the file-system encoding.
PYTHON_LIB=/usr/lib/python3.11
PYTHON_FILES="encodings/__init__.py encodings/aliases.py encodings/utf_8.py"
# And mawk, Debian's awk: perf_real.sh folds perf script's output with it
# (busybox awk takes a minute of TCG time over the larger sessions).
REAL_TOOLS=/usr/bin/mawk

[ -f "$HDR/linux/perf_event.h" ] ||
	make -s -C "$SRC" O="$BUILD/kernel-c" LLVM="$LLVM_SUFFIX" headers
grep -q PERF_RECORD_CALLCHAIN_DEFERRED "$HDR/linux/perf_event.h" ||
	die "uapi headers in $HDR lack PERF_RECORD_CALLCHAIN_DEFERRED"

T=${SELFTEST_SRC:-$SRC/tools/testing/selftests/unwind_deferred}
[ -n "${SELFTESTS:-}" ] || die "SELFTESTS (the guest test list) is not set"
mkdir -p "$BUILD/selftests"
make -s -C "$T" OUTPUT="$BUILD/selftests" KHDR_INCLUDES="-isystem $HDR"

rm -rf "$ROOT"
mkdir -p "$ROOT"/{bin,dev,proc,sys,tmp,tests,usr/bin,etc}
cp /bin/busybox "$ROOT/bin/busybox"
file "$ROOT/bin/busybox" | grep -q 'statically linked' || die "/bin/busybox is not static (busybox-static)"
cp "$TOP/scripts/guest/init" "$ROOT/init"
# Every program the selftests' Makefile builds, the files they load
# (TEST_GEN_FILES: deferred_tables_cache's liba.so and libb.so, next to
# it in /tests), and its scripts.
progs=$(make -s -C "$T" OUTPUT="$BUILD/selftests" KHDR_INCLUDES="-isystem $HDR" \
	--eval='print-progs: ; @echo $(TEST_GEN_PROGS) $(TEST_GEN_PROGS_EXTENDED) $(TEST_GEN_FILES)' \
	print-progs)
for f in $progs; do
	cp "$f" "$ROOT/tests/"
done
cp "$T"/*.sh "$ROOT/tests/"
# The leaf's size, for perf_defer.sh (no nm in the guest).
size=$(nm -S "$BUILD/selftests/dc_workload" | awk '$4 == "workload_leaf" { print $2 }')
[ -n "$size" ] || die "no workload_leaf in dc_workload"
echo $((16#$size)) >"$ROOT/tests/dc_workload.leaf-size"
# Test order in the guest.
for t in $SELFTESTS; do
	[ -x "$ROOT/tests/$t" ] || die "selftest $t was not built"
done
printf "%s\n" $SELFTESTS >"$ROOT/tests/list"

# A dynamically linked program's loader and libraries, from this root, at
# their paths here (so the loader and libc always come from one glibc).
copy_libs() {	# program
	local interp lib
	interp=$(readelf -l "$1" | sed -n 's/.*interpreter: \(.*\)]/\1/p')
	for lib in $interp $(ldd "$1" | awk '/=> \//{print $3}'); do
		mkdir -p "$ROOT$(dirname "$lib")"
		cp -L "$lib" "$ROOT$lib"
	done
}
# perf + what it links.
cp "$BUILD/perf/perf" "$ROOT/usr/bin/perf"
copy_libs "$BUILD/perf/perf"
# Real programs for perf_real.sh: Debian's own binaries, stripped and
# built without frame pointers, with their libraries, at their paths on
# this machine (the guest calls them by absolute path: /bin has busybox's
# applets of the same names).  scripts/compare-real.py reads these copies.
for p in $REAL_PROGRAMS $REAL_TOOLS; do
	[ -x "$p" ] || die "no $p on this machine (perf_real.sh needs it)"
	cp -L "$p" "$ROOT$p"
	copy_libs "$p"
done
case " $REAL_PROGRAMS " in
*" /usr/bin/python3.11 "*)
	for f in $PYTHON_FILES; do
		[ -f "$PYTHON_LIB/$f" ] || die "no $PYTHON_LIB/$f on this machine (python3.11 needs it)"
		mkdir -p "$ROOT$PYTHON_LIB/$(dirname "$f")"
		cp "$PYTHON_LIB/$f" "$ROOT$PYTHON_LIB/$f"
	done ;;
esac
# No addr2line in the guest: perf script is always run with --no-inline.
echo 'root:x:0:0::/:/bin/sh' >"$ROOT/etc/passwd"

(cd "$ROOT" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
log "initramfs: $OUT ($(du -h "$OUT" | cut -f1))"
