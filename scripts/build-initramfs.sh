#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the selftests and the guest's initramfs: busybox-static, /init,
# the selftests under /tests, and the perf tool with its shared libraries
# and dynamic loader taken from this machine's root (resolved here, so the
# loader and libc always come from the same glibc).
. "$(dirname "$0")/lib.sh"
SRC=$BUILD/linux
HDR=$BUILD/kernel-c/usr/include
ROOT=$BUILD/initramfs
OUT=$BUILD/initramfs.cpio

[ -f "$HDR/linux/perf_event.h" ] ||
	make -s -C "$SRC" O="$BUILD/kernel-c" LLVM="$LLVM_SUFFIX" headers
grep -q PERF_RECORD_CALLCHAIN_DEFERRED "$HDR/linux/perf_event.h" ||
	die "uapi headers in $HDR lack PERF_RECORD_CALLCHAIN_DEFERRED"

T=$SRC/tools/testing/selftests/unwind_deferred
mkdir -p "$BUILD/selftests"
make -s -C "$T" OUTPUT="$BUILD/selftests" KHDR_INCLUDES="-isystem $HDR"

rm -rf "$ROOT"
mkdir -p "$ROOT"/{bin,dev,proc,sys,tmp,tests,usr/bin,etc}
cp /bin/busybox "$ROOT/bin/busybox"
file "$ROOT/bin/busybox" | grep -q 'statically linked' || die "/bin/busybox is not static (busybox-static)"
cp "$TOP/scripts/guest/init" "$ROOT/init"
for f in deferred_task deferred_task_32 deferred_entry dc_workload; do
	cp "$BUILD/selftests/$f" "$ROOT/tests/"
done
cp "$T"/perf_defer.sh "$T"/perf_demo.sh "$ROOT/tests/"
# The leaf's size, for perf_defer.sh (no nm in the guest).
size=$(nm -S "$BUILD/selftests/dc_workload" | awk '$4 == "workload_leaf" { print $2 }')
[ -n "$size" ] || die "no workload_leaf in dc_workload"
echo $((16#$size)) >"$ROOT/tests/dc_workload.leaf-size"
# Test order in the guest.
printf "%s\n" deferred_task deferred_task_32 deferred_entry perf_defer.sh >"$ROOT/tests/list"

# perf + what it links, from this root.
cp "$BUILD/perf/perf" "$ROOT/usr/bin/perf"
interp=$(readelf -l "$BUILD/perf/perf" | sed -n 's/.*interpreter: \(.*\)]/\1/p')
for lib in $interp $(ldd "$BUILD/perf/perf" | awk '/=> \//{print $3}'); do
	mkdir -p "$ROOT$(dirname "$lib")"
	cp -L "$lib" "$ROOT$lib"
done
# No addr2line in the guest: perf script is always run with --no-inline.
echo 'root:x:0:0::/:/bin/sh' >"$ROOT/etc/passwd"

(cd "$ROOT" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
log "initramfs: $OUT ($(du -h "$OUT" | cut -f1))"
