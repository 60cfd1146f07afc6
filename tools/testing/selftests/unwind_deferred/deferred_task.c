// SPDX-License-Identifier: GPL-2.0
/*
 * Deferred user callchains on a per-task cpu-clock event, read the way a
 * profiler reads them: raw perf_event_open, an mmap'ed ring buffer, no
 * libperf.
 *
 * A child runs a frame-pointer workload whose leaf makes system calls in a
 * loop.  The parent samples it with defer_callchain=1, defer_output=1 and
 * checks that every sample's callchain ends with PERF_CONTEXT_USER_DEFERRED
 * and a cookie, that each cookie has exactly one
 * PERF_RECORD_CALLCHAIN_DEFERRED from the same pid/tid, that no deferred
 * record is left without a sample, and that the merged user stack of the
 * samples taken in the leaf is exactly the workload's call chain, the
 * whole record down to main <- __libc_start_call_main (DC_MAIN_FRAMES).
 *
 * The child stops itself (SIGSTOP) before the event is disabled: a stopping
 * task runs its pending task_work in get_signal() first, so the deferred
 * unwinds of its samples are written before it stops.  The one exception is
 * a sample that lands in that last kernel entry after get_signal() ran the
 * task_work, on the way into the stop: its unwind is queued for the
 * task's next return to user space, which never comes while the event is
 * enabled.  Such samples are counted apart and must be the very last ones,
 * with get_signal() on their kernel stack.  (A task that *exits* with an
 * unwind pending is a different case, tested separately.)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../kselftest.h"
#include "dc_util.h"
#include "workload.h"

#define PERIOD_NS	250000	/* 4 kHz */
#define RING_PAGES	256
#define MIN_SAMPLES	40

static const char *const expected[] = {
	WORKLOAD_CHAIN, "run_child", "dc_profile_child", DC_MAIN_FRAMES
};
#define NR_EXPECTED (int)(sizeof(expected) / sizeof(expected[0]))

/*
 * Where the leaf has no frame of its own: before its prologue
 * (push %rbp; mov %rsp,%rbp) has run, and at its final ret after pop %rbp.
 * A frame-pointer walk from there finds the caller's frame in %rbp and so
 * skips the direct caller, workload_c: the documented limit of
 * frame-pointer unwinding (upstream only fixes the entry case with a
 * uprobe).  The expected chain there is the full one without workload_c.
 */
static const char *const expected_frameless[] = {
	"workload_leaf", "workload_b", "workload_a", "workload", "run_child",
	"dc_profile_child", DC_MAIN_FRAMES
};
#define NR_FRAMELESS (int)(sizeof(expected_frameless) / sizeof(expected_frameless[0]))

__attribute__((noinline)) static void run_child(void *arg)
{
	workload(*(unsigned int *)arg);
	asm volatile("" ::: "memory");	/* not a tail call */
}

int main(int argc, char **argv)
{
	unsigned int ms = argc > 1 ? atoi(argv[1]) : 1000;
	size_t bad_ctx = 0, bad_pid = 0, missing = 0, dup = 0, orphan = 0;
	size_t bad_rec = 0, leaf = 0, exact = 0, printed = 0, cookies = 0;
	size_t frameless = 0, stopping = 0;
	struct perf_event_attr attr;
	struct dc_log log = { 0 };
	int bad_where = -1;
	uint64_t leaf_addr, leaf_size;
	pid_t pid;

	ksft_print_header();
	ksft_set_plan(7);
	if (dc_syms_load())
		ksft_exit_fail_msg("cannot read own symbol table\n");
	leaf_addr = dc_sym_addr("workload_leaf", &leaf_size);
	if (!leaf_addr)
		ksft_exit_fail_msg("no workload_leaf symbol\n");
	dc_kallsyms_load();

	dc_attr_init(&attr, PERIOD_NS, true);
	pid = dc_profile_child(run_child, &ms, &attr, RING_PAGES, &log);
	if (pid < 0)
		ksft_exit_fail_msg("profiling the workload: %s\n", strerror(-pid));

	for (size_t i = 0; i < log.nr_samples; i++) {
		struct dc_sample *s = &log.samples[i];
		long idx, n;

		if (s->pid != (uint32_t)pid || s->tid != (uint32_t)pid)
			bad_pid++;
		if (!s->ends_deferred || !s->cookie || s->has_user_ctx) {
			bad_ctx++;
			continue;
		}
		idx = dc_find_deferred(&log, s->pid, s->tid, s->cookie, &n);
		if (idx < 0 && dc_in_final_stop(&log, s)) {
			stopping++;
			ksft_print_msg("sample %zu of %zu: last entry, on the way into the stop after its task_work ran: record due at the next return to user space\n",
				       i + 1, log.nr_samples);
			continue;
		}
		if (idx < 0) {
			missing++;
			ksft_print_msg("sample %zu of %zu at %llu: cookie %#llx has no deferred record\n",
				       i + 1, log.nr_samples,
				       (unsigned long long)s->time,
				       (unsigned long long)s->cookie);
			if (missing <= 3)
				dc_print_merged(s, NULL);
			continue;
		}
		log.deferred[idx].matched++;
		if (n > 1)
			dup++;
		struct dc_deferred *d = &log.deferred[idx];

		if (d->nr && d->ips[0] >= leaf_addr && d->ips[0] < leaf_addr + leaf_size) {
			bool fl = dc_ip_frameless(d->ips[0], leaf_addr, leaf_size);
			int where;

			leaf++;
			frameless += fl;
			if (fl ? dc_stack_is(d->ips, d->nr, expected_frameless,
					     NR_FRAMELESS, &where) :
				 dc_stack_is(d->ips, d->nr, expected,
					     NR_EXPECTED, &where)) {
				exact++;
				if (printed < 3 && s->nr_kernel) {
					dc_print_merged(s, d);
					printed++;
				}
			} else if (bad_where < 0) {
				bad_where = where;
				ksft_print_msg("leaf sample with wrong stack (frame %d):\n", where);
				dc_print_merged(s, d);
			}
		}
	}
	for (size_t i = 0; i < log.nr_deferred; i++) {
		struct dc_deferred *d = &log.deferred[i];

		if (d->matched) {
			cookies++;
		} else {
			orphan++;
			ksft_print_msg("deferred record cookie %#llx has no sample\n",
				       (unsigned long long)d->cookie);
		}
		if (d->misc != PERF_RECORD_MISC_USER || !d->nr)
			bad_rec++;
		for (uint32_t j = 0; j < d->nr; j++)
			if (d->ips[j] >= DC_USER_MAX)
				bad_rec++;
	}

	ksft_print_msg("samples %zu, deferred records %zu, matched cookies %zu, "
		       "leaf samples %zu (%zu at its frameless entry/exit), exact stacks %zu, "
		       "lost %llu, other records %llu\n",
		       log.nr_samples, log.nr_deferred, cookies, leaf, frameless, exact,
		       (unsigned long long)log.lost, (unsigned long long)log.other);

	ksft_test_result(log.nr_samples >= MIN_SAMPLES && !bad_pid,
			 "%zu samples (>= %d), all from pid/tid %d\n",
			 log.nr_samples, MIN_SAMPLES, pid);
	ksft_test_result(!bad_ctx,
			 "every sample ends with PERF_CONTEXT_USER_DEFERRED + non-zero cookie (%zu do not)\n",
			 bad_ctx);
	ksft_test_result(!missing && !dup,
			 "every cookie has exactly one deferred record of the same pid/tid (%zu missing, %zu duplicated, %zu in the final stop)\n",
			 missing, dup, stopping);
	ksft_test_result(!orphan && log.nr_deferred,
			 "every deferred record (%zu) has a sample (%zu orphans)\n",
			 log.nr_deferred, orphan);
	ksft_test_result(!bad_rec,
			 "deferred records are MISC_USER, non-empty, user addresses only (%zu bad)\n",
			 bad_rec);
	ksft_test_result(leaf * 2 >= log.nr_samples && exact == leaf && leaf,
			 "merged stack of all %zu leaf samples is %s <- %s <- %s <- %s <- %s <- run_child <- dc_profile_child <- main <- __libc_start_call_main exactly, without %s at the leaf's frameless entry/exit (%zu exact, %zu frameless)\n",
			 leaf, expected[0], expected[1], expected[2], expected[3],
			 expected[4], expected[1], exact, frameless);
	ksft_test_result(!log.lost && !log.malformed,
			 "no record lost (%llu) or malformed (%llu)\n",
			 (unsigned long long)log.lost,
			 (unsigned long long)log.malformed);

	dc_log_free(&log);
	dc_finished();
}
