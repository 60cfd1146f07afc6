#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# dev-guest.sh VARIANT TEST... [--skip=TEST:N] [--xfail=TEST:N:TOKEN]
#   Developer loop for selftests: build this checkout's selftests (no
#   overlay, no kernel build), pack an initramfs that runs only TEST...,
#   and boot the already built kernel-VARIANT from $KERNELS (default:
#   this checkout's build/) with it.  Everything it writes goes to
#   $BUILD (default build/dev), so several checkouts (git worktrees) can
#   test at once against one set of kernels.
. "$(dirname "$0")/lib.sh"
variant=${1:?usage: dev-guest.sh VARIANT TEST...}
shift
[ $# -gt 0 ] || die "usage: dev-guest.sh VARIANT TEST..."
KERNELS=${KERNELS:-$TOP/build}
export BUILD=${DEV_BUILD:-$TOP/build/dev}
mkdir -p "$BUILD/st/tools/testing/selftests"
for d in kernel-c kernel-rust perf linux; do
	[ -e "$KERNELS/$d" ] || die "no $KERNELS/$d: build the kernels first (make kernel-rust perf)"
	ln -sfn "$KERNELS/$d" "$BUILD/$d"
done
# The benchmark and debug kernels too, where built (VARIANT c-bench,
# rust-bench, c-debug, rust-debug).
for d in kernel-c-bench kernel-rust-bench kernel-c-debug kernel-rust-debug; do
	if [ -e "$KERNELS/$d" ]; then ln -sfn "$KERNELS/$d" "$BUILD/$d"; fi
done
# The selftests' Makefile includes ../lib.mk: give it one.
st=$BUILD/st/tools/testing/selftests
cp "$KERNELS"/linux/tools/testing/selftests/{lib.mk,kselftest*.h} "$st/"
rsync -a --delete "$TOP/tools/testing/selftests/unwind_deferred/" "$st/unwind_deferred/"
# Options (--skip=..., --xfail=...) go to the log checker only.
tests=
for a in "$@"; do
	case $a in --*) ;; *) tests="$tests $a" ;; esac
done
SELFTESTS="${tests# }" SELFTEST_SRC=$st/unwind_deferred "$TOP/scripts/build-initramfs.sh"
exec "$TOP/scripts/run-guest.sh" "$variant" test guest "$@"
