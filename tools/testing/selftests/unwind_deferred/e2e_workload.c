// SPDX-License-Identifier: GPL-2.0
/*
 * The workload of the end-to-end benchmark (perf_bench.sh): a fixed amount
 * of work done under a deep frame-pointer stack (E2E_DEPTH frames of
 * descend() between main and the leaf), either in user mode or in long
 * system calls.
 *
 *   e2e_workload plan cpu MS
 *	Calibrate (unprofiled) and print the arguments of a CPU-bound run
 *	of about MS ms: "cpu LOOPS".
 *   e2e_workload plan sys SPE FREQ MS
 *	Calibrate and print the arguments of a syscall-bound run of about
 *	MS ms whose system calls each last SPE periods of a FREQ Hz clock
 *	(about SPE samples per kernel entry): "sys BYTES COUNT".
 *   e2e_workload cpu LOOPS
 *	LOOPS turns of a loop in the leaf, in user mode: every tick of a
 *	cpu-clock event interrupts user mode, one sample per kernel entry.
 *   e2e_workload sys BYTES COUNT
 *	COUNT readv()s of BYTES from /dev/zero, each one kernel entry.
 *
 * A run prints "t0=NS t1=NS ns=NS cpu_ns=NS frames=N": CLOCK_MONOTONIC
 * around the work (under QEMU -icount, guest instructions), the thread's
 * CPU time around it (CLOCK_THREAD_CPUTIME_ID: the interrupts and the
 * task_work it runs are in it, other tasks that preempt it are not), and
 * the number of frames a frame-pointer walk from the leaf finds.  The work is given, not timed,
 * so a profiled and an unprofiled run do the same work and the difference
 * of their times is the profiler's cost.  The plans are made unprofiled,
 * once, and passed to every run of a case.
 *
 * System calls are made inline (dc_syscall3), so that the user stack of a
 * sample in a system call starts in the leaf and goes through every frame.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <fcntl.h>

#include "dc_util.h"

#ifndef noinline
#define noinline	__attribute__((__noinline__))
#endif

#define E2E_DEPTH	150
/* readv() chunks: one buffer, reused by every iovec of a call. */
#define CHUNK		(256 * 1024)
#define MAX_IOV		1024
#define PAGE		4096

struct ts {
	long sec, nsec;	/* the native ABI of __NR_clock_gettime */
};

struct work {
	int sys;		/* 0: CPU loop, 1: readv() */
	uint64_t loops;		/* cpu: turns of the loop */
	uint64_t bytes, count;	/* sys: bytes per call, calls */
	uint64_t t0, t1;	/* CLOCK_MONOTONIC around the work */
	uint64_t c0, c1;	/* the thread's CPU time around it */
	unsigned int frames;	/* frame-pointer frames seen from the leaf */
	uint64_t sink;
	long err;
};

static char buf[CHUNK];
static struct iovec iov[MAX_IOV];
static int zero_fd = -1;

static uint64_t now_ns(int clock)
{
	struct ts t;

	dc_syscall3(__NR_clock_gettime, clock, (long)&t, 0);
	return (uint64_t)t.sec * 1000000000 + t.nsec;
}

#define CLOCK_MONOTONIC_ID		1
#define CLOCK_THREAD_CPUTIME		3

/* Frames from here on, as a frame-pointer walk sees them. */
static noinline unsigned int count_frames(void)
{
	uintptr_t *fp = __builtin_frame_address(0);
	unsigned int n = 0;

	while (fp && n < 4096) {
		uintptr_t *next = (uintptr_t *)fp[0];

		n++;
		if (next <= fp || ((uintptr_t)next & (sizeof(long) - 1)))
			break;
		fp = next;
	}
	return n;
}

/* Set up @iov for reads of @bytes; how many iovecs. */
static int setup_iov(uint64_t bytes)
{
	int n = 0;

	while (bytes && n < MAX_IOV) {
		uint64_t len = bytes < CHUNK ? bytes : CHUNK;

		iov[n].iov_base = buf;
		iov[n].iov_len = len;
		bytes -= len;
		n++;
	}
	return bytes ? -1 : n;
}

static noinline void leaf(struct work *w)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	int nr_iov = 0;

	DC_KEEP_FRAME();
	w->frames = count_frames() - 1;	/* not count_frames() itself */
	if (w->sys) {
		nr_iov = setup_iov(w->bytes);
		if (nr_iov < 0) {
			w->err = -1;
			return;
		}
	}
	w->c0 = now_ns(CLOCK_THREAD_CPUTIME);
	w->t0 = now_ns(CLOCK_MONOTONIC_ID);
	if (w->sys) {
		for (uint64_t i = 0; i < w->count; i++) {
			long r = dc_syscall3(__NR_readv, zero_fd, (long)iov,
					     nr_iov);

			if (r != (long)w->bytes) {
				w->err = r < 0 ? r : -1;
				break;
			}
		}
	} else {
		for (uint64_t i = 0; i < w->loops; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			asm volatile("" : "+r"(x));
		}
	}
	w->t1 = now_ns(CLOCK_MONOTONIC_ID);
	w->c1 = now_ns(CLOCK_THREAD_CPUTIME);
	w->sink = x;
}

/* Run the work @depth frames below the caller. */
static noinline void descend(int depth, struct work *w)
{
	DC_KEEP_FRAME();
	if (depth > 0)
		descend(depth - 1, w);
	else
		leaf(w);
	asm volatile("" ::: "memory");	/* not a tail call */
}

static int run(struct work *w)
{
	w->err = 0;
	descend(E2E_DEPTH, w);
	return w->err ? -1 : 0;
}

/* Thread CPU time of @w, the shortest of @tries runs. */
static uint64_t time_work(struct work *w, int tries)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < tries; i++) {
		uint64_t t0 = now_ns(CLOCK_THREAD_CPUTIME), t;

		if (run(w))
			return 0;
		t = now_ns(CLOCK_THREAD_CPUTIME) - t0;
		if (t < best)
			best = t;
	}
	return best;
}

static int plan(int argc, char **argv)
{
	struct work w = { 0 };

	if (argc == 2 && !strcmp(argv[0], "cpu")) {
		uint64_t ms = strtoull(argv[1], NULL, 0), ns;

		w.loops = 1000000;
		ns = time_work(&w, 3);
		if (!ns)
			return -1;
		printf("cpu %llu\n",
		       (unsigned long long)(w.loops * ms * 1000000 / ns));
		return 0;
	}
	if (argc == 4 && !strcmp(argv[0], "sys")) {
		uint64_t spe = strtoull(argv[1], NULL, 0);
		uint64_t freq = strtoull(argv[2], NULL, 0);
		uint64_t ms = strtoull(argv[3], NULL, 0);
		uint64_t ns, per_call, bytes, count;

		if (!freq)
			return -1;
		w.sys = 1;
		w.bytes = 16 * CHUNK;
		w.count = 4;
		ns = time_work(&w, 3);
		if (!ns)
			return -1;
		/* ns per call of the given length, bytes to last that long */
		per_call = spe * 1000000000 / freq;
		bytes = w.bytes * w.count * per_call / ns;
		bytes = (bytes + PAGE / 2) / PAGE * PAGE;
		if (!bytes)
			bytes = PAGE;
		if (bytes > (uint64_t)CHUNK * MAX_IOV)
			return -1;
		count = (ms * 1000000 + per_call / 2) / per_call;
		printf("sys %llu %llu\n", (unsigned long long)bytes,
		       (unsigned long long)(count ? count : 1));
		return 0;
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct work w = { 0 };

	zero_fd = open("/dev/zero", O_RDONLY);
	if (zero_fd < 0) {
		perror("/dev/zero");
		return 1;
	}
	memset(buf, 1, sizeof(buf));	/* fault it in before any timing */
	if (argc > 1 && !strcmp(argv[1], "plan")) {
		if (plan(argc - 2, argv + 2)) {
			fprintf(stderr, "e2e_workload: bad plan arguments or calibration failed\n");
			return 1;
		}
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "cpu")) {
		w.loops = strtoull(argv[2], NULL, 0);
	} else if (argc == 4 && !strcmp(argv[1], "sys")) {
		w.sys = 1;
		w.bytes = strtoull(argv[2], NULL, 0);
		w.count = strtoull(argv[3], NULL, 0);
	} else {
		fprintf(stderr, "usage: e2e_workload plan cpu MS | plan sys SPE FREQ MS | cpu LOOPS | sys BYTES COUNT\n");
		return 2;
	}
	if (run(&w)) {
		fprintf(stderr, "e2e_workload: readv: %ld\n", w.err);
		return 1;
	}
	printf("t0=%llu t1=%llu ns=%llu cpu_ns=%llu frames=%u\n",
	       (unsigned long long)w.t0, (unsigned long long)w.t1,
	       (unsigned long long)(w.t1 - w.t0),
	       (unsigned long long)(w.c1 - w.c0), w.frames);
	return 0;
}
