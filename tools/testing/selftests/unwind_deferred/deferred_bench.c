// SPDX-License-Identifier: GPL-2.0
/*
 * Drives the micro-benchmarks of CONFIG_UNWIND_DEFERRED_BENCH
 * (kernel/unwind/bench_deferred.c) and prints their results, one
 * "BENCH ..." line each, for scripts/bench.py to collect:
 *
 *   deferred_bench                   one short pass (make check): every
 *                                    benchmark runs and reports
 *   deferred_bench ROUNDS            the full benchmarks, ROUNDS times
 *                                    (make bench)
 *
 * Each command is written from a known depth of frame-pointer frames, so
 * the walk and the task_work see a stack of that depth.  The 32-bit build
 * (deferred_bench_32) runs the walk only: the rest is the same kernel
 * code whatever the task's word size.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../kselftest.h"
#include "dc_util.h"

#define DIR	"/sys/kernel/debug/unwind_deferred_bench"

static int ctl = -1;
static bool smoke = true;

/* Write @cmd from @depth frames below the caller; the kernel's answer. */
__attribute__((noinline)) long descend(int depth, const char *cmd)
{
	long r;

	DC_KEEP_FRAME();
	if (depth > 0) {
		r = descend(depth - 1, cmd);
		asm volatile("" ::: "memory");	/* not a tail call */
		return r;
	}
	return dc_syscall3(__NR_write, ctl, (long)cmd, strlen(cmd));
}

static int run(int depth, const char *fmt, int arg)
{
	char cmd[64];
	long r;

	snprintf(cmd, sizeof(cmd), fmt, arg);
	r = descend(depth, cmd);
	if (r < 0) {
		ksft_print_msg("'%s' at depth %d: %s\n", cmd, depth,
			       strerror((int)-r));
		return -1;
	}
	return 0;
}

/* Print the results, "BENCH <word size> <depth> <line>"; how many. */
static int collect(int depth)
{
	FILE *f = fopen(DIR "/results", "r");
	char line[512];
	int n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "impl ", 5) || !strncmp(line, "clock_ns ", 9))
			continue;
		printf("BENCH ws=%zu depth=%d %s", sizeof(long), depth, line);
		n++;
	}
	fclose(f);
	run(0, "clear", 0);
	return n;
}

static void *sleeper(void *arg)
{
	pause();
	return arg;
}

/* cancel against @n extra threads (a perf session closing). */
static int cancel_with_threads(int n)
{
	pthread_attr_t attr;
	pthread_t *t = calloc(n, sizeof(*t));
	int made = 0, bad = 0;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	for (; t && made < n; made++)
		if (pthread_create(&t[made], &attr, sleeper, NULL))
			break;
	bad |= run(0, "tracers %d", 1) | run(0, "cancel", 0);
	collect(0);
	for (int i = 0; i < made; i++)
		pthread_cancel(t[i]);
	for (int i = 0; i < made; i++)
		pthread_join(t[i], NULL);
	free(t);
	return bad || made != n ? -1 : 0;
}

int main(int argc, char **argv)
{
	static const int depths[] = { 8, 64, 256, 500 };
	static const int tracers[] = { 1, 4, 16 };
	int rounds = 1, iters = 3, bad = 0, n = 0;

	if (argc > 1) {
		rounds = atoi(argv[1]);
		smoke = false;
		iters = 200;
	}
	ksft_print_header();
	ksft_set_plan(1);
	if (access(DIR, F_OK))
		mount("debugfs", "/sys/kernel/debug", "debugfs", 0, NULL);
	ctl = open(DIR "/ctl", O_WRONLY);
	if (ctl < 0)
		ksft_exit_fail_msg("%s: %s (CONFIG_UNWIND_DEFERRED_BENCH)\n",
				   DIR "/ctl", strerror(errno));
	run(0, "clear", 0);
	for (int r = 0; r < rounds; r++) {
		for (size_t i = 0; i < sizeof(depths) / sizeof(depths[0]); i++) {
			bad |= run(depths[i], "walk %d", iters);
			n += collect(depths[i]);
		}
		if (sizeof(long) == 4)
			continue;
		for (size_t i = 0; i < sizeof(tracers) / sizeof(tracers[0]); i++) {
			bad |= run(0, "tracers %d", tracers[i]);
			bad |= run(16, "task %d", iters);
			n += collect(16);
			if (tracers[i] != 1)
				continue;
			bad |= run(16, "irq %d", iters);
			bad |= run(16, "nmi %d", iters);
			n += collect(16);
		}
		bad |= cancel_with_threads(smoke ? 10 : 100);
		if (!smoke)
			bad |= cancel_with_threads(1000);
		n += 1 + !smoke;
		run(0, "tracers %d", 0);
	}
	ksft_test_result(!bad && n > 0, "benchmarks ran (%d results)\n", n);
	ksft_finished();
}
