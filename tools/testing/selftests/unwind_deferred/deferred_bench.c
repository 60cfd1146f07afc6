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
 *
 * Besides the driver's timings, two measurements of its own (64-bit):
 *
 *   memory: the kernel memory that deferred unwinding keeps per task (its
 *   cache, allocated on the task's first deferred unwind): /proc/meminfo
 *   (and /proc/slabinfo's kmalloc-4k, if the kernel has it) with N threads
 *   started, again once each of them has had one deferred unwind (the
 *   driver's "task 1", a request and the task_work in the thread itself),
 *   and after they exit: "BENCH ... memory round=R threads=N unwound=N
 *   slab_kb0..3=... sunreclaim_kb0..3=... [kmalloc4k0..3=...]" with 0 the
 *   baseline, 1 the threads started, 2 unwound, 3 exited; twice in full
 *   mode (1,000 threads), the second round judged.  Then cancel is timed
 *   against those threads, each with its cache ("cancel cached=N").
 *
 *   scale: cancel against 10 (smoke) or 10, 100, 1,000 and 10,000 (full)
 *   sleeping threads, CANCEL_REPS times each.
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
#include <sys/wait.h>
#include <unistd.h>

#include "../kselftest.h"
#include "dc_util.h"

#define DIR	"/sys/kernel/debug/unwind_deferred_bench"
#define TABLES	"/proc/sys/kernel/unwind_user_tables"
#define SHARED	"/proc/sys/kernel/unwind_user_tables_shared"

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

/*
 * Print the results, "BENCH <word size> <depth> <line>", only those that
 * start with @only if it is set, with @tag after that start; how many.
 */
static int collect_from(int depth, const char *only, const char *tag)
{
	FILE *f = fopen(DIR "/results", "r");
	size_t len = only ? strlen(only) : 0;
	char line[512];
	int n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "impl ", 5) || !strncmp(line, "clock_ns ", 9))
			continue;
		if (only && strncmp(line, only, len))
			continue;
		printf("BENCH ws=%zu depth=%d %s%s%s", sizeof(long), depth,
		       only ? only : "", tag, line + len);
		n++;
	}
	fclose(f);
	run(0, "clear", 0);
	return n;
}

static int collect(int depth)
{
	return collect_from(depth, NULL, "");
}

/* Small stacks: 10,000 threads must fit in the guest's 2 GiB. */
#define THREAD_STACK	(32 * 1024)
/* Cancels timed per thread count (grace periods vary, take several). */
#define CANCEL_REPS	5

static void *sleeper(void *arg)
{
	pause();
	return arg;
}

/*
 * Print the cancel results with @tag before them ("cached=N "), so that
 * they are told apart from those against sleeping threads.
 */
static int collect_cancel(const char *tag)
{
	return collect_from(0, "cancel ", tag);
}

/* cancel against @n extra threads (a perf session closing). */
static int cancel_with_threads(int n)
{
	pthread_attr_t attr;
	pthread_t *t = calloc(n, sizeof(*t));
	int made = 0, bad = 0, got = 0;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	for (; t && made < n; made++)
		if (pthread_create(&t[made], &attr, sleeper, NULL))
			break;
	if (made != n)
		ksft_print_msg("cancel: %d of %d threads started\n", made, n);
	for (int r = 0; r < CANCEL_REPS; r++)
		bad |= run(0, "tracers %d", 1) | run(0, "cancel", 0);
	got = collect_cancel("");
	for (int i = 0; i < made; i++)
		pthread_cancel(t[i]);
	for (int i = 0; i < made; i++)
		pthread_join(t[i], NULL);
	free(t);
	return bad || made != n || got != CANCEL_REPS ? -1 : 0;
}

/* Kernel memory figures, in kB (-1: absent). */
struct mem {
	long slab, sunreclaim, k4k;
};

/* The figures now, with the per-CPU counters folded in first. */
static void mem_read(struct mem *m)
{
	char line[256], name[64];
	long v, active;
	FILE *f;
	int fd;

	m->slab = m->sunreclaim = m->k4k = -1;
	fd = open("/proc/sys/vm/stat_refresh", O_WRONLY);
	if (fd >= 0) {
		if (write(fd, "1", 1) < 0)
			ksft_print_msg("stat_refresh: %s\n", strerror(errno));
		close(fd);
	}
	f = fopen("/proc/meminfo", "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%63[^:]: %ld", name, &v) != 2)
			continue;
		if (!strcmp(name, "Slab"))
			m->slab = v;
		else if (!strcmp(name, "SUnreclaim"))
			m->sunreclaim = v;
	}
	if (f)
		fclose(f);
	/* Only with CONFIG_SLUB_DEBUG (not with SLUB_TINY). */
	f = fopen("/proc/slabinfo", "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%63s %ld", name, &active) == 2 &&
		    !strcmp(name, "kmalloc-4k"))
			m->k4k = active;
	if (f)
		fclose(f);
}

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int phase, unwound, failed;
} mt = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

static void mt_wait(int phase)
{
	pthread_mutex_lock(&mt.lock);
	while (mt.phase < phase)
		pthread_cond_wait(&mt.cond, &mt.lock);
	pthread_mutex_unlock(&mt.lock);
}

static void mt_set(int phase)
{
	pthread_mutex_lock(&mt.lock);
	mt.phase = phase;
	pthread_cond_broadcast(&mt.cond);
	pthread_mutex_unlock(&mt.lock);
}

/* One deferred unwind in this thread (its first: the cache comes). */
static void *unwinder(void *arg)
{
	int bad;

	mt_wait(1);
	bad = run(8, "task %d", 1);
	pthread_mutex_lock(&mt.lock);
	mt.unwound += !bad;
	mt.failed += !!bad;
	pthread_cond_broadcast(&mt.cond);
	pthread_mutex_unlock(&mt.lock);
	mt_wait(2);
	return arg;
}

/*
 * Read the figures until Slab holds still (tasks that exited are freed
 * after an RCU grace period, their slabs later); how long it took, in ms.
 */
static int mem_settle(struct mem *m)
{
	int waited = 0;
	long prev;

	mem_read(m);
	do {
		prev = m->slab;
		usleep(100 * 1000);
		waited += 100;
		mem_read(m);
	} while (!smoke && (labs(m->slab - prev) > 16 || waited < 300) &&
		 waited < 10000);
	return waited;
}

/*
 * Kernel memory of @n threads that each had one deferred unwind; then
 * cancel against them.  Full mode runs it twice (@round 1, 2): the first
 * round leaves slabs that other objects keep partly used; from the second
 * on, the caches must show (more Slab once the threads have unwound) and
 * be gone once they have exited.
 */
static int memory_with_threads(int n, int round)
{
	struct mem m[4];
	pthread_attr_t attr;
	pthread_t *t = calloc(n, sizeof(*t));
	int made = 0, bad = 0, waited;
	long delta, left;
	char tag[32];

	if (!t)
		return -1;
	mt.phase = mt.unwound = mt.failed = 0;
	bad |= run(0, "tracers %d", 1);
	mem_settle(&m[0]);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	for (; made < n; made++)
		if (pthread_create(&t[made], &attr, unwinder, NULL))
			break;
	mem_read(&m[1]);
	mt_set(1);
	pthread_mutex_lock(&mt.lock);
	while (mt.unwound + mt.failed < made)
		pthread_cond_wait(&mt.cond, &mt.lock);
	pthread_mutex_unlock(&mt.lock);
	mem_read(&m[2]);
	run(0, "clear", 0);
	bad |= run(0, "cancel", 0);
	snprintf(tag, sizeof(tag), "cached=%d ", mt.unwound);
	collect_cancel(tag);
	mt_set(2);
	for (int i = 0; i < made; i++)
		pthread_join(t[i], NULL);
	free(t);
	waited = mem_settle(&m[3]);
	delta = m[2].slab - m[1].slab;
	left = m[3].slab - m[0].slab;

	printf("BENCH ws=%zu depth=0 memory round=%d threads=%d unwound=%d waited_ms=%d",
	       sizeof(long), round, made, mt.unwound, waited);
	for (int i = 0; i < 4; i++)
		printf(" slab_kb%d=%ld sunreclaim_kb%d=%ld", i, m[i].slab, i,
		       m[i].sunreclaim);
	for (int i = 0; m[0].k4k >= 0 && i < 4; i++)
		printf(" kmalloc4k%d=%ld", i, m[i].k4k);
	printf("\n");
	ksft_print_msg("memory, round %d: %d threads, %d with one deferred unwind: Slab %+ld kB with the threads, %+ld kB more once unwound, %+ld kB from the baseline %d ms after they exited\n",
		       round, made, mt.unwound, m[1].slab - m[0].slab, delta,
		       left, waited);
	if (made != n || mt.unwound != made)
		return -1;
	if (m[0].slab < 0 || m[2].sunreclaim < 0)
		return -1;
	if (smoke || round < 2)
		return bad;
	/* Nothing seen, or not freed: fail (4 kB a thread expected). */
	if (delta < n * 2L || left > delta / 10) {
		ksft_print_msg("memory: %s\n", delta < n * 2L ?
			       "the caches did not show in Slab" :
			       "Slab did not go back to its baseline");
		return -1;
	}
	return bad;
}

/* vm.drop_caches = 2: every shrinker, the unwinder's included. */
static void drop_slab(int *bad)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);

	if (fd < 0 || write(fd, "2\n", 2) != 2) {
		ksft_print_msg("vm.drop_caches: %s\n", strerror(errno));
		*bad = 1;
	}
	if (fd >= 0)
		close(fd);
}

static const int fault_depths[] = { 8, 64, 256 };

/* Inline, as faultable_shared(): the walks' depths are the same in both. */
static inline __attribute__((always_inline))
int faultable_series(int iters, int *bad, const char *tag)
{
	int n = 0;

	for (size_t i = 0; i < ARRAY_SIZE(fault_depths); i++) {
		*bad |= run(fault_depths[i], "faultable %d", iters);
		n += collect_from(fault_depths[i], "faultable", tag);
	}
	return n;
}

/* Whether rows compiled from files are shared by every process (on). */
static bool shared_rows(void)
{
	char c = '0';
	int fd = open(SHARED, O_RDONLY);

	if (fd < 0)
		return false;
	if (read(fd, &c, 1) != 1)
		c = '0';
	close(fd);
	return c == '1';
}

/*
 * The table walks again in a new process of this program (a fork: a new
 * mm, no rows of its own), whose first walk finds the rows this process
 * compiled from the same files: "faultable tables=1 shared=1".
 */
static inline __attribute__((always_inline))
int faultable_shared(int iters, int *bad)
{
	int status, n;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		*bad = 1;
		return 0;
	}
	if (!pid) {
		int child_bad = 0;

		n = faultable_series(iters, &child_bad, " tables=1 shared=1");
		fflush(stdout);
		_exit(child_bad || n != ARRAY_SIZE(fault_depths));
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		*bad = 1;
		return 0;
	}
	return ARRAY_SIZE(fault_depths);
}

/*
 * The deferred walk (unwind_user_faultable()) at depths 8, 64 and 256, by
 * frame pointers and, where the kernel has them (Rust, sysctl
 * kernel.unwind_user_tables), by the unwind tables of the same frames:
 * "faultable tables=0|1 nr=...", or without "tables=" on a kernel that has
 * none.  The switch is put back as it was.  Where rows compiled from files
 * are shared (sysctl kernel.unwind_user_tables_shared), the table walks
 * start cold and run again in a new process (faultable_shared()).
 */
static int faultable_walks(int iters, int *bad)
{
	int fd = open(TABLES, O_RDWR), n = 0;
	char was = '0';

	if (fd >= 0 && pread(fd, &was, 1, 0) != 1)
		was = '0';
	for (int on = 0; on <= (fd >= 0); on++) {
		if (fd >= 0 && pwrite(fd, on ? "1" : "0", 1, 0) != 1) {
			ksft_print_msg("%s: %s\n", TABLES, strerror(errno));
			*bad = 1;
			break;
		}
		/*
		 * The first table walk cold: reclaim drops every file's rows
		 * no process uses (vm.drop_caches = 2 runs the shrinkers;
		 * this process has none yet).
		 */
		if (on && shared_rows())
			drop_slab(bad);
		n += faultable_series(iters, bad,
				      fd < 0 ? "" : on ? " tables=1" : " tables=0");
	}
	if (fd >= 0 && shared_rows())
		n += faultable_shared(iters, bad);
	if (fd >= 0) {
		if (pwrite(fd, was == '1' ? "1" : "0", 1, 0) != 1)
			*bad = 1;
		close(fd);
	}
	return n;
}

/*
 * Switch the unwind tables (where the kernel has them) to @on; returns
 * what the switch was ('0' or '1'), 0 if there is none.
 */
static char tables_switch(char on)
{
	int fd = open(TABLES, O_RDWR);
	char was = 0;

	if (fd < 0)
		return 0;
	if (pread(fd, &was, 1, 0) != 1 || pwrite(fd, &on, 1, 0) != 1)
		ksft_print_msg("%s: %s\n", TABLES, strerror(errno));
	close(fd);
	return was;
}

int main(int argc, char **argv)
{
	static const int depths[] = { 8, 64, 256, 500 };
	static const int tracers[] = { 1, 4, 16 };
	static const int threads[] = { 10, 100, 1000, 10000 };
	int rounds = 1, iters = 3, bad = 0, mem_bad = 0, n = 0;
	bool only_faultable;
	char was = 0;

	if (argc > 1) {
		rounds = atoi(argv[1]);
		smoke = false;
		iters = 200;
	}
	/* "faultable": the deferred walks only, 200 times each. */
	only_faultable = argc > 1 && !strcmp(argv[1], "faultable");
	ksft_print_header();
	ksft_set_plan(sizeof(long) == 8 ? 2 : 1);
	if (access(DIR, F_OK))
		mount("debugfs", "/sys/kernel/debug", "debugfs", 0, NULL);
	ctl = open(DIR "/ctl", O_WRONLY);
	if (ctl < 0)
		ksft_exit_fail_msg("%s: %s (CONFIG_UNWIND_DEFERRED_BENCH)\n",
				   DIR "/ctl", strerror(errno));
	run(0, "clear", 0);
	if (only_faultable) {
		n = faultable_walks(iters, &bad);
		ksft_test_result(!bad && n > 0, "deferred walks ran (%d results)\n", n);
		if (sizeof(long) == 8)
			ksft_test_result_skip("memory: not run with 'faultable'\n");
		ksft_finished();
	}
	for (int r = 0; r < rounds; r++) {
		for (size_t i = 0; i < ARRAY_SIZE(depths); i++) {
			bad |= run(depths[i], "walk %d", iters);
			n += collect(depths[i]);
		}
		n += faultable_walks(iters, &bad);
		if (sizeof(long) == 4)
			continue;
		/*
		 * The requests, the task_work and the memory compare the two
		 * implementations: by frame pointers, the walk both have (the
		 * table walk has its own figures, "faultable tables=1").
		 */
		was = tables_switch('0');
		for (size_t i = 0; i < ARRAY_SIZE(tracers); i++) {
			bad |= run(0, "tracers %d", tracers[i]);
			bad |= run(16, "task %d", iters);
			n += collect(16);
			if (tracers[i] != 1)
				continue;
			bad |= run(16, "irq %d", iters);
			bad |= run(16, "nmi %d", iters);
			n += collect(16);
		}
		for (int mr = 1; mr <= (smoke ? 1 : 2); mr++)
			mem_bad |= memory_with_threads(smoke ? 10 : 1000, mr);
		if (smoke) {
			bad |= cancel_with_threads(10);
			n += CANCEL_REPS;
		}
		for (size_t i = 0; !smoke && i < ARRAY_SIZE(threads); i++) {
			bad |= cancel_with_threads(threads[i]);
			n += CANCEL_REPS;
		}
		run(0, "tracers %d", 0);
		if (was)
			tables_switch(was);
	}
	ksft_test_result(!bad && n > 0, "benchmarks ran (%d results)\n", n);
	if (sizeof(long) == 8)
		ksft_test_result(!mem_bad, "memory: %d threads, one deferred unwind each%s\n",
				 smoke ? 10 : 1000,
				 smoke ? " (figures not judged in the smoke pass)" : "");
	ksft_finished();
}
