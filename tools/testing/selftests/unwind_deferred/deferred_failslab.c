// SPDX-License-Identifier: GPL-2.0
/*
 * The per-task unwind cache cannot be allocated (fault injection).
 *
 * The deferred unwinder allocates a task's cache (struct unwind_cache, one
 * kmalloc of 4 KiB) in the task_work of its first deferred unwind, in the
 * task, where it may sleep.  If that allocation fails, every callback of
 * that kernel entry must still be called, with an empty trace (upstream's
 * process_unwind_deferred(): "the callback must always be called, even if
 * it's just an empty trace"), so perf still writes one
 * PERF_RECORD_CALLCHAIN_DEFERRED per cookie, with no entries: no record
 * claims a stack it does not have, and no sample is left without its
 * record.  The next sampled kernel entry tries again and succeeds.
 *
 * How the allocation is made to fail, and only it: /proc/thread-self/
 * fail-nth (CONFIG_FAULT_INJECTION) with failslab (CONFIG_FAILSLAB,
 * GFP_KERNEL allocations included: ignore-gfp-wait=N) fails the thread's
 * next slab allocation made in task context.  Each round is a new thread
 * (no cache yet) that opens a disabled per-thread event on itself, runs
 * the workload once unsampled (so that its page faults allocate nothing
 * later), arms fail-nth, enables the event and runs the workload: the
 * first slab allocation it makes is the cache's, in the task_work of its
 * first sampled kernel entry.  Checked per round, exactly:
 *   - fail-nth reads back 0 (the failure was injected) and enabling the
 *     event did not fail (so the failure hit a later allocation);
 *   - every sample has a cookie, and each cookie exactly one record of the
 *     thread, none excused: the sampling is stopped by a period of 1000 s
 *     (PERF_EVENT_IOC_PERIOD), not by disabling the event, so an unwind
 *     requested in that last ioctl still finds its event on when it runs
 *     at the return to user space (a disabled event gets no record);
 *   - exactly one record is empty, and it is the thread's first record;
 *   - every other record holds only user addresses, and every one taken in
 *     the workload's leaf is exactly its chain down to thread_main <-
 *     start_thread (DC_THREAD_FRAMES).
 * Nothing leaks: the debug kernels' kmemleak scan at the end of the run.
 * Without fault injection in the kernel the test is skipped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../kselftest.h"
#include "dc_util.h"
#include "workload.h"

#define PERIOD_NS	250000	/* 4 kHz */
#define RING_PAGES	256
#define WORK_MS		150
#define MIN_SAMPLES	20
#define ROUNDS		3
#define FAILSLAB	"/sys/kernel/debug/failslab"

static const char *const leaf_chain[] = { WORKLOAD_CHAIN, DC_THREAD_FRAMES };
#define NR_LEAF (int)(sizeof(leaf_chain) / sizeof(leaf_chain[0]))

struct round {
	pid_t tid;
	const char *setup_err;	/* what failed before the measurement */
	int err;
	char fail_nth[16];	/* fail-nth read back after the run */
	struct dc_log log;
};

__attribute__((noinline)) void *thread_main(void *arg)
{
	struct round *r = arg;
	struct perf_event_attr attr;
	struct dc_ring ring;
	ssize_t n;
	int nth;

	r->tid = gettid();
	dc_attr_init(&attr, PERIOD_NS, true);
	if (dc_ring_open(&ring, &attr, 0, -1, RING_PAGES, 0)) {
		r->setup_err = "perf_event_open/mmap";
		r->err = errno;
		return NULL;
	}
	nth = open("/proc/thread-self/fail-nth", O_RDWR);
	if (nth < 0) {
		r->setup_err = "open fail-nth";
		r->err = errno;
		dc_rings_close(&ring, 1);
		return NULL;
	}
	/* Unsampled: fault in the stack and the code the workload uses. */
	workload(5);
	if (write(nth, "1", 1) != 1) {
		r->setup_err = "arm fail-nth";
		r->err = errno;
	} else if (ioctl(ring.fd, PERF_EVENT_IOC_ENABLE, 0)) {
		r->setup_err = "PERF_EVENT_IOC_ENABLE (the injected failure hit it)";
		r->err = errno;
	} else {
		uint64_t never = 1000000000000ULL;	/* ns: no more samples */

		workload(WORK_MS);
		if (ioctl(ring.fd, PERF_EVENT_IOC_PERIOD, &never)) {
			r->setup_err = "PERF_EVENT_IOC_PERIOD";
			r->err = errno;
		}
	}
	n = pread(nth, r->fail_nth, sizeof(r->fail_nth) - 1, 0);
	r->fail_nth[n > 0 ? n : 0] = '\0';
	r->fail_nth[strcspn(r->fail_nth, "\n")] = '\0';
	/* Disarm, in case it was not consumed. */
	if (write(nth, "0", 1) != 1)
		ksft_print_msg("cannot disarm fail-nth: %s\n", strerror(errno));
	close(nth);
	dc_ring_drain(&ring, &r->log);
	dc_rings_close(&ring, 1);
	return NULL;
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -EIO;
}

static bool user_only(const struct dc_deferred *d)
{
	for (uint32_t i = 0; i < d->nr; i++)
		if (d->ips[i] >= DC_USER_MAX)
			return false;
	return true;
}

static bool check_round(int k, struct round *r)
{
	struct dc_log *log = &r->log;
	size_t missing = 0, dup = 0, nocookie = 0, empty = 0;
	size_t notuser = 0, leaf = 0, exact = 0, foreign = 0;
	long first = -1, first_empty = -1;
	bool ok;

	if (r->setup_err) {
		ksft_print_msg("round %d: %s: %s\n", k, r->setup_err, strerror(r->err));
		return false;
	}
	for (size_t i = 0; i < log->nr_samples; i++) {
		struct dc_sample *s = &log->samples[i];
		long cnt, at;

		if (s->tid != (uint32_t)r->tid) {
			foreign++;
			continue;
		}
		if (!s->ends_deferred || !s->cookie) {
			nocookie++;
			continue;
		}
		at = dc_find_deferred(log, s->pid, s->tid, s->cookie, &cnt);
		if (at < 0) {
			missing++;
			ksft_print_msg("round %d: sample at %llu: cookie %#llx has no record\n",
				       k, (unsigned long long)s->time,
				       (unsigned long long)s->cookie);
		} else if (cnt != 1) {
			dup++;
		}
	}
	for (size_t i = 0; i < log->nr_deferred; i++) {
		struct dc_deferred *d = &log->deferred[i];
		bool frameless;

		if (d->tid != (uint32_t)r->tid) {
			foreign++;
			continue;
		}
		if (first < 0 || d->time < log->deferred[first].time)
			first = i;
		if (!d->nr) {
			empty++;
			if (first_empty < 0)
				first_empty = i;
			continue;
		}
		if (!user_only(d))
			notuser++;
		switch (dc_check_leaf_record(d, "workload_leaf", leaf_chain, NR_LEAF,
					     &frameless)) {
		case 1:
			exact++;
			/* fall through */
		case 0:
			leaf++;
			break;
		}
	}
	ksft_print_msg("round %d: tid %d, fail-nth after the run '%s', %zu samples, %zu records (%zu empty, first at %ld, the empty one at %ld), %zu leaf records (%zu exact), missing %zu, duplicated %zu, no cookie %zu, non-user %zu, other tasks' %zu\n",
		       k, r->tid, r->fail_nth, log->nr_samples, log->nr_deferred, empty,
		       first, first_empty, leaf, exact, missing, dup, nocookie,
		       notuser, foreign);
	ok = r->fail_nth[0] == '0' && log->nr_samples >= MIN_SAMPLES && !missing &&
	     !dup && !nocookie && !notuser && !foreign && empty == 1 &&
	     first_empty == first && leaf && exact == leaf && !log->lost && !log->malformed;
	return ok;
}

int main(void)
{
	struct round rounds[ROUNDS];

	ksft_print_header();
	if (access("/proc/thread-self/fail-nth", F_OK))
		ksft_exit_skip("no /proc/thread-self/fail-nth (CONFIG_FAULT_INJECTION is off)\n");
	mount("debugfs", "/sys/kernel/debug", "debugfs", 0, NULL);
	if (access(FAILSLAB, F_OK))
		ksft_exit_skip("no %s (CONFIG_FAILSLAB/FAULT_INJECTION_DEBUG_FS off)\n", FAILSLAB);
	/* GFP_KERNEL allocations too; one line in the log per injection. */
	if (write_str(FAILSLAB "/ignore-gfp-wait", "N") ||
	    write_str(FAILSLAB "/verbose", "1"))
		ksft_exit_fail_msg("cannot configure %s\n", FAILSLAB);
	if (dc_syms_load())
		ksft_exit_fail_msg("cannot read own symbol table\n");
	dc_kallsyms_load();
	ksft_set_plan(ROUNDS);

	for (int k = 0; k < ROUNDS; k++) {
		pthread_t t;

		memset(&rounds[k], 0, sizeof(rounds[k]));
		if (pthread_create(&t, NULL, thread_main, &rounds[k]))
			ksft_exit_fail_msg("pthread_create\n");
		pthread_join(t, NULL);
		ksft_test_result(check_round(k, &rounds[k]),
				 "round %d: the cache allocation failed in the first sampled entry: its record is empty and the thread's first, every other record is the exact stack, every cookie has exactly one record\n",
				 k);
		dc_log_free(&rounds[k].log);
	}
	write_str(FAILSLAB "/ignore-gfp-wait", "Y");
	dc_finished();
}
