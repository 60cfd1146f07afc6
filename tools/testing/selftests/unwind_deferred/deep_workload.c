// SPDX-License-Identifier: GPL-2.0
/*
 * The workload of the frameless deep benchmark (perf_bench_deep.sh): a
 * fixed amount of CPU-bound work, with a system call now and then, done
 * DEEP_DEPTH + 1 frames below main, in a program without frame pointers
 * (built as frameless_workload: -O2 -fomit-frame-pointer, dynamic against
 * glibc, -no-pie, .eh_frame and .eh_frame_hdr present).  A frame-pointer
 * walk cannot get past the leaf; the unwind tables give every frame down
 * to main and _start; perf's --call-graph dwarf copies 8 KiB of stack a
 * sample, less than this stack holds.
 *
 *   deep_workload plan MS
 *	Calibrate (unprofiled, from the thread's CPU time) and print the
 *	number of rounds of a run of about MS ms: "ROUNDS".
 *   deep_workload ROUNDS
 *	ROUNDS rounds at the bottom of the stack, each TURNS turns of a
 *	xorshift loop and one getppid() through glibc's (frameless) wrapper;
 *	prints "rounds=N depth=N cpu_ns=N" (the thread's CPU time of the
 *	work; the benchmark measures the whole process with cpu_time).
 *
 * The stack: four functions of different frame sizes (local arrays of 4,
 * 8, 12 and 16 words, written and read around the call, so they are
 * real stack, and a result added after the call, so that no call is a
 * tail call) call each other in turn, DEEP_DEPTH of them between run()
 * and the leaf: about 100 bytes a frame, 15 KiB in all.  The functions
 * are noipa: GCC neither inlines them nor assumes anything across them.
 * The work is given, not timed: a profiled and an unprofiled run do the
 * same work, and the difference of their CPU times is the profiler's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOIPA		__attribute__((noipa))
#define DEEP_DEPTH	150
/* xorshift turns a round: about 100 us of guest time under -icount. */
#define TURNS		20000

struct work {
	uint64_t rounds;
	uint64_t x;
};

static uint64_t thread_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (uint64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

NOIPA uint64_t deep_leaf(struct work *w)
{
	uint64_t x = w->x;

	for (uint64_t r = 0; r < w->rounds; r++) {
		for (int i = 0; i < TURNS; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			__asm__ volatile("" : "+r"(x));
		}
		x += (uint64_t)getppid();
	}
	w->x = x;
	return x;
}

NOIPA uint64_t deep_a(int depth, struct work *w);
NOIPA uint64_t deep_b(int depth, struct work *w);
NOIPA uint64_t deep_c(int depth, struct work *w);
NOIPA uint64_t deep_d(int depth, struct work *w);

/*
 * One frame: WORDS words of locals, made real (their address escapes
 * into an asm that may read memory), the next frame, then a word of them
 * added to its result (not a tail call).
 */
#define DEEP_FRAME(name, next, words)					\
NOIPA uint64_t name(int depth, struct work *w)				\
{									\
	uint64_t a[words], r;						\
									\
	for (int i = 0; i < (words); i++)				\
		a[i] = (uint64_t)depth * 31 + i;			\
	__asm__ volatile("" : : "r"(a) : "memory");			\
	r = depth > 0 ? next(depth - 1, w) : deep_leaf(w);		\
	__asm__ volatile("" : : "r"(a) : "memory");			\
	return r + a[depth % (words)];					\
}

DEEP_FRAME(deep_a, deep_b, 4)
DEEP_FRAME(deep_b, deep_c, 8)
DEEP_FRAME(deep_c, deep_d, 12)
DEEP_FRAME(deep_d, deep_a, 16)

/* DEEP_DEPTH frames of deep_[abcd] between here and the leaf. */
NOIPA uint64_t deep_run(struct work *w)
{
	return deep_a(DEEP_DEPTH - 1, w);
}

static int plan(const char *arg)
{
	struct work w = { .rounds = 20, .x = 0x9e3779b97f4a7c15ULL };
	uint64_t ms = strtoull(arg, NULL, 0), best = UINT64_MAX;

	for (int i = 0; i < 3; i++) {
		uint64_t t0 = thread_ns(), t;

		deep_run(&w);
		t = thread_ns() - t0;
		if (t < best)
			best = t;
	}
	if (!ms || !best)
		return -1;
	printf("%llu\n", (unsigned long long)(w.rounds * ms * 1000000 / best + 1));
	return 0;
}

int main(int argc, char **argv)
{
	struct work w = { .x = 0x9e3779b97f4a7c15ULL };
	uint64_t c0, c1;

	if (argc == 3 && !strcmp(argv[1], "plan")) {
		if (plan(argv[2])) {
			fprintf(stderr, "deep_workload: bad plan argument\n");
			return 1;
		}
		return 0;
	}
	if (argc != 2 || !(w.rounds = strtoull(argv[1], NULL, 0))) {
		fprintf(stderr, "usage: deep_workload plan MS | deep_workload ROUNDS\n");
		return 2;
	}
	c0 = thread_ns();
	deep_run(&w);
	c1 = thread_ns();
	printf("rounds=%llu depth=%d cpu_ns=%llu sink=%llx\n",
	       (unsigned long long)w.rounds, DEEP_DEPTH,
	       (unsigned long long)(c1 - c0), (unsigned long long)w.x);
	return 0;
}
