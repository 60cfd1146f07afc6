#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# With CONFIG_UNWIND_USER_RUST=y no code or data of the C implementation
# (kernel/unwind/user.o, deferred.o) may be in vmlinux: every symbol those
# objects define in the C kernel is either absent from the Rust kernel's
# vmlinux or defined there by an object of kernel/unwind/rust/.  Nor may
# perf's C deferred-callchain glue: the Rust vmlinux has Rust's instead.
#
# Then the stack the Rust unwinder's entry points use at worst, measured on
# the objects of kernel-rust and kernel-rust-debug by scripts/stack-depth.py
# (each function's frame also checked against LLVM's -Zemit-stack-sizes for
# the same code; docs/design.md, "Stack use").  The goal is under 1 KiB
# for the task_work path (issue 17), met since 2026-12-07 (1,000 bytes):
# kernel-rust's limit is the goal itself (1,016: frames are multiples of
# 8), so that a change that takes it over fails here.  The debug kernel's
# frames are larger (KASAN and UBSAN checks: no stack redzones,
# CONFIG_KASAN_STACK is off) and its stacks twice as large (KASAN doubles
# THREAD_SIZE to 32 KiB): its own limit, its figure plus 256 bytes
# rounded up to 64, so that no growth goes unseen (2026-12-07: 1,816 for
# unwind_user_faultable()).
. "$(dirname "$0")/lib.sh"
STACK_GOAL=1024
STACK_LIMITS="rust:1016 rust-debug:2112"
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
pass=$((bad == 0 ? 1 : 0)) fail=$((bad == 0 ? 0 : 1))
for vm in $STACK_LIMITS; do
	v=${vm%:*} max=${vm#*:}
	obj=$BUILD/kernel-$v/kernel/unwind/rust/unwind_rust.o
	if [ -f "$obj" ] && python3 "$TOP/scripts/stack-depth.py" --check --brief --cross-check \
		--max "$max" --goal $STACK_GOAL --label "kernel-$v" "$obj"; then
		pass=$((pass + 1))
	else
		[ -f "$obj" ] || echo "no $obj (build kernel-$v first)" >&2
		echo "kernel-$v: stack depth check failed (limit $max bytes; see above)" >&2
		fail=$((fail + 1))
	fi
done
mkdir -p "$BUILD/results"
echo "$pass $fail symbols" >"$BUILD/results/symbols.txt"
[ $fail -eq 0 ]
