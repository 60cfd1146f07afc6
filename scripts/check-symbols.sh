#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# With CONFIG_UNWIND_USER_RUST=y no code or data of the C implementation
# (kernel/unwind/user.o, deferred.o) may be in vmlinux: every symbol those
# objects define in the C kernel is either absent from the Rust kernel's
# vmlinux or defined there by an object of kernel/unwind/rust/.  Nor may
# perf's C deferred-callchain glue: the Rust vmlinux has Rust's instead.
. "$(dirname "$0")/lib.sh"
C=$BUILD/kernel-c
R=$BUILD/kernel-rust
NM=llvm-nm$LLVM_SUFFIX
for o in user.o deferred.o; do
	[ -f "$C/kernel/unwind/$o" ] || die "no $C/kernel/unwind/$o (build kernel-c first)"
	[ ! -e "$R/kernel/unwind/$o" ] || die "kernel-rust built the C $o"
done
csyms=$($NM --defined-only "$C"/kernel/unwind/{user,deferred}.o | awk 'NF == 3 { print $3 }' | sort -u)
rsyms=$($NM --defined-only "$R"/kernel/unwind/rust/*.o | awk 'NF == 3 { print $3 }' | sort -u)
vsyms=$($NM "$R/vmlinux" | awk 'NF == 3 { print $3 }' | sort -u)
bad=0 total=0 ours=0
for s in $csyms; do
	total=$((total + 1))
	if grep -qxF "$s" <<<"$vsyms"; then
		if grep -qxF "$s" <<<"$rsyms"; then
			ours=$((ours + 1))
		else
			echo "vmlinux has $s, defined neither by Rust nor by kernel/unwind/rust/" >&2
			bad=$((bad + 1))
		fi
	fi
done
echo "C kernel/unwind/*.o define $total symbols; the Rust vmlinux has $ours of them, all from kernel/unwind/rust/, and $bad others"
cvsyms=$($NM "$C/vmlinux" | awk 'NF == 3 { print $3 }' | sort -u)
for s in perf_unwind_deferred_callback perf_callchain_deferred_output perf_unwind_work; do
	grep -qxF "$s" <<<"$cvsyms" || { echo "C vmlinux lacks perf's $s" >&2; bad=$((bad + 1)); }
	! grep -qxF "$s" <<<"$vsyms" || { echo "Rust vmlinux has perf's C $s" >&2; bad=$((bad + 1)); }
done
for s in perf_callchain_rust perf_callchain_deferred_init; do
	grep -qxF "$s" <<<"$rsyms" || { echo "kernel/unwind/rust/ does not define $s" >&2; bad=$((bad + 1)); }
done
echo "perf glue: C vmlinux has the 3 C deferred-callchain symbols, the Rust vmlinux none of them and Rust's perf_callchain_rust / perf_callchain_deferred_init instead ($bad problems in all)"
mkdir -p "$BUILD/results"
echo "$((bad == 0 ? 1 : 0)) $((bad == 0 ? 0 : 1)) symbols" >"$BUILD/results/symbols.txt"
[ $bad -eq 0 ]
