#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# run-guest.sh VARIANT JOB [SECTIONS...]
#   Boot $BUILD/kernel-VARIANT's bzImage with the project's initramfs under
#   QEMU, run JOB (test|demo) in the guest, save the serial log as
#   $BUILD/logs/VARIANT-JOB.log and check it with guestlog.py: non-zero
#   exit on a timeout, a failed or missing test, or any kernel
#   WARN/BUG/oops/lockdep/KASAN report.  SECTIONS are the sections that
#   must be present (default: those the job runs).
# Environment: SMP (vCPUs, default 2), GUEST_TIMEOUT (s, default 600),
#   GUEST_APPEND (extra kernel command line, e.g. inject=warn),
#   ACCEL (tcg|kvm; default: kvm only if a probe boot with it works),
#   QEMU_EXTRA (more QEMU options, e.g. -icount shift=0,sleep=off),
#   GUEST_RUN (the log's and result's name instead of VARIANT-JOB),
#   GUEST_KUNIT=0 (the kernel has no KUnit: none is looked for).
. "$(dirname "$0")/lib.sh"

variant=${1:?usage: run-guest.sh VARIANT JOB}
job=${2:?usage: run-guest.sh VARIANT JOB}
shift 2
KERNEL=$BUILD/kernel-$variant/arch/x86/boot/bzImage
INITRD=$BUILD/initramfs.cpio
SMP=${SMP:-2}
TIMEOUT=${GUEST_TIMEOUT:-600}
mkdir -p "$BUILD/logs"
[ -f "$KERNEL" ] || die "no kernel $KERNEL"
[ -f "$INITRD" ] || die "no initramfs $INITRD"

qemu() {
	local accel=$1 timeout=$2 log=$3 jobarg=$4
	timeout -k 5 "$timeout" qemu-system-x86_64 -accel "$accel" -m 2G -smp "$SMP" \
		-kernel "$KERNEL" -initrd "$INITRD" \
		-append "console=ttyS0 panic=-1 oops=panic job=$jobarg ncpus=$SMP variant=$variant ${GUEST_APPEND:-}" \
		-display none -serial "file:$log" -monitor none -no-reboot \
		${QEMU_EXTRA:-} </dev/null
}

# KVM is used only when proven to work here: on these machines /dev/kvm
# exists but a KVM guest hangs.  The probe's verdict is cached per machine.
pick_accel() {
	[ -n "${ACCEL:-}" ] && { echo "$ACCEL"; return; }
	local cached=$CACHE/kvm-probe
	if [ -f "$cached" ]; then
		cat "$cached"
		return
	fi
	local verdict=tcg
	if [ -w /dev/kvm ]; then
		log "probing KVM (20 s at most)"
		if qemu kvm 20 "$BUILD/logs/kvm-probe.log" probe >/dev/null 2>&1 &&
			grep -q '==== GUEST DONE' "$BUILD/logs/kvm-probe.log"; then
			verdict=kvm
		fi
	fi
	mkdir -p "$CACHE"
	echo "$verdict" | tee "$cached"
}

# Debug kernels: a WARN (KASAN, UBSAN, lockdep, debug objects report
# through it) stops the guest there and then.
case $variant in *-debug) GUEST_APPEND="panic_on_warn=1 ${GUEST_APPEND:-}" ;; esac

accel=$(pick_accel)
# GUEST_RUN (default VARIANT-JOB) names the log and the result, for a
# second run of one kernel under other QEMU options.
run=${GUEST_RUN:-$variant-$job}
LOG=$BUILD/logs/$run.log
log "guest: kernel-$variant job=$job smp=$SMP accel=$accel timeout=${TIMEOUT}s -> $LOG"
t0=$(date +%s)
rc=0
qemu "$accel" "$TIMEOUT" "$LOG" "$job" || rc=$?
log "guest: exited rc=$rc after $(( $(date +%s) - t0 ))s"
timed_out=
[ $rc -eq 124 ] || [ $rc -eq 137 ] && timed_out=--timed-out
mkdir -p "$BUILD/results"
kunit=(--kunit-tool "$BUILD/linux/tools/testing/kunit/kunit.py")
[ "${GUEST_KUNIT:-1}" = 0 ] && kunit=()
python3 "$TOP/scripts/guestlog.py" "$LOG" --job "$job" --results "$BUILD/results/$run.txt" "${kunit[@]}" $timed_out "$@"
