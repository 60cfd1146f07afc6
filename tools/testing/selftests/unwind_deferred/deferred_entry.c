// SPDX-License-Identifier: GPL-2.0
/*
 * Deferred callchains per kernel entry, on a per-task cpu-clock event.
 *
 * 1. One long kernel entry sampled many times: a child reads 16 MiB from
 *    /dev/zero eight times (each read one long system call) under a
 *    10 kHz event.  All samples taken inside one read carry one cookie,
 *    and each cookie has exactly one PERF_RECORD_CALLCHAIN_DEFERRED: the
 *    user stack is unwound and written once per kernel entry.
 * 2. defer_callchain without defer_output on any event: samples still end
 *    with PERF_CONTEXT_USER_DEFERRED and a cookie, and no deferred record
 *    is written at all.
 * 7. Without defer_callchain (defer_output still set), samples keep the
 *    classic in-place user callchain (PERF_CONTEXT_USER, then the stack),
 *    carry no cookie, and no deferred record is written.
 * 6. Without sample_id_all, a deferred record is exactly header, cookie,
 *    nr, ips[nr]: no trailer; every cookie still has exactly one record.
 * 3-5. The attr bits that shape a callchain keep upstream's meaning with
 *    defer_callchain: exclude_callchain_user gives kernel-only callchains
 *    and no deferred record; exclude_callchain_kernel gives callchains that
 *    are just PERF_CONTEXT_USER_DEFERRED + cookie, with their records;
 *    sample_max_stack caps the sample's own callchain, not the deferred
 *    record (upstream writes the whole cached user stack).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../kselftest.h"
#include "dc_util.h"
#include "workload.h"

#define NR_READS	8
#define READ_SIZE	(16 << 20)

struct reads {
	int fd;
	char *buf;
};

/*
 * The system calls are made here, with inline asm, so the user stack of
 * every sample inside them starts in this function.
 */
__attribute__((noinline)) void entry_leaf(struct reads *r)
{
	DC_KEEP_FRAME();
	for (int i = 0; i < NR_READS; i++) {
		long ret = dc_syscall3(__NR_read, r->fd, (long)r->buf, READ_SIZE);
		if (ret != READ_SIZE)
			_exit(4);
	}
}

static void slow_reads(void *arg)
{
	entry_leaf(arg);
	asm volatile("" ::: "memory");
}

static void short_workload(void *arg)
{
	workload(600);
	asm volatile("" ::: "memory");
}

static void one_record_per_entry(void)
{
	uint64_t leaf, leaf_size, max_per_cookie = 0;
	size_t in_reads = 0, cookies = 0, bad = 0;
	struct perf_event_attr attr;
	struct dc_log log = { 0 };
	struct reads r;
	pid_t pid;

	leaf = dc_sym_addr("entry_leaf", &leaf_size);
	r.fd = open("/dev/zero", O_RDONLY);
	r.buf = mmap(NULL, READ_SIZE, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (!leaf || r.fd < 0 || r.buf == MAP_FAILED)
		ksft_exit_fail_msg("set-up failed\n");

	dc_attr_init(&attr, 100000, true);	/* 10 kHz */
	pid = dc_profile_child(slow_reads, &r, &attr, 512, &log);
	if (pid < 0)
		ksft_exit_fail_msg("profiling: %s\n", strerror(-pid));

	/*
	 * Samples with ksys_read() on their kernel stack were taken inside a
	 * read: one of the eight, or the child's read of its start pipe
	 * (whose user stack starts in libc's read()).  Other kernel-mode
	 * samples of this task (interrupts taken from user mode, the unwind
	 * at their exit) belong to other kernel entries.
	 */
	for (size_t i = 0; i < log.nr_samples; i++) {
		struct dc_sample *s = &log.samples[i];
		uint64_t same = 0;
		long idx, n;
		bool first = true, leaf_entry;

		if (!dc_kernel_stack_has(s, "ksys_read"))
			continue;
		in_reads++;
		/* Every sample of the task is deferred: none may lack a cookie. */
		if (!s->ends_deferred || !s->cookie) {
			if (bad++ < 3) {
				ksft_print_msg("sample %zu of %zu in a read has no cookie\n",
					       i + 1, log.nr_samples);
				dc_print_merged(s, NULL);
			}
			continue;
		}
		idx = dc_find_deferred(&log, s->pid, s->tid, s->cookie, &n);
		if (n != 1) {
			if (bad++ < 3) {
				ksft_print_msg("sample %zu of %zu: cookie %#llx has %ld records\n",
					       i + 1, log.nr_samples,
					       (unsigned long long)s->cookie, n);
				dc_print_merged(s, NULL);
			}
			continue;
		}
		leaf_entry = log.deferred[idx].ips[0] >= leaf &&
			     log.deferred[idx].ips[0] < leaf + leaf_size;
		for (size_t j = 0; j < log.nr_samples; j++) {
			if (log.samples[j].cookie != s->cookie ||
			    !dc_kernel_stack_has(&log.samples[j], "ksys_read"))
				continue;
			if (j < i)
				first = false;
			same++;
		}
		if (first)
			cookies++;
		if (leaf_entry && same > max_per_cookie)
			max_per_cookie = same;
	}
	ksft_print_msg("long entries: %zu samples, %zu inside the reads, %zu cookies (entries) for them, at most %llu samples per entry, %zu deferred records in all\n",
		       log.nr_samples, in_reads, cookies,
		       (unsigned long long)max_per_cookie, log.nr_deferred);
	ksft_test_result(in_reads && cookies <= NR_READS + 1 && max_per_cookie >= 5 && !bad,
			 "%zu samples inside %d long reads (+ the start pipe's) carry %zu cookies (<= %d), up to %llu samples per read, each with a cookie and exactly one deferred record for it (%zu not)\n",
			 in_reads, NR_READS, cookies, NR_READS + 1,
			 (unsigned long long)max_per_cookie, bad);
	dc_log_free(&log);
	munmap(r.buf, READ_SIZE);
	close(r.fd);
}

static void no_defer_output(void)
{
	struct perf_event_attr attr;
	struct dc_log log = { 0 };
	size_t marked = 0;
	pid_t pid;

	dc_attr_init(&attr, 250000, false);
	pid = dc_profile_child(short_workload, NULL, &attr, 256, &log);
	if (pid < 0)
		ksft_exit_fail_msg("profiling: %s\n", strerror(-pid));
	for (size_t i = 0; i < log.nr_samples; i++)
		marked += log.samples[i].ends_deferred && log.samples[i].cookie;
	ksft_print_msg("no defer_output: %zu samples, %zu with a cookie, %zu deferred records\n",
		       log.nr_samples, marked, log.nr_deferred);
	ksft_test_result(log.nr_samples && marked == log.nr_samples && !log.nr_deferred,
			 "defer_output on no event: all %zu samples carry a cookie, %zu deferred records written (0 expected)\n",
			 log.nr_samples, log.nr_deferred);
	dc_log_free(&log);
}

/*
 * Is @s, which has no record, a sample of its thread's last kernel entry,
 * the one that ends in the final stop, whose record is due only at the
 * next return to user space (see deferred_task.c)?  For events with
 * exclude_callchain_kernel only: their samples have no kernel stack, so
 * dc_in_final_stop()'s evidence (the signal code on it) is not there.
 * What is required instead: a kernel-mode sample IP, and the latest
 * cookie of the sample's own pid/tid (not of the whole log).  Every
 * excused sample is printed with the kernel function of its IP.
 */
static bool in_last_entry(const struct dc_log *log, const struct dc_sample *s)
{
	uint64_t time = 0, cookie = 0;

	for (size_t i = 0; i < log->nr_samples; i++) {
		const struct dc_sample *t = &log->samples[i];

		if (t->pid == s->pid && t->tid == s->tid && t->time >= time) {
			time = t->time;
			cookie = t->cookie;
		}
	}
	if (!s->cookie || s->cookie != cookie || s->ip < DC_USER_MAX)
		return false;
	ksft_print_msg("sample without record in the last entry: pid %u tid %u cookie %#llx ip %s\n",
		       s->pid, s->tid, (unsigned long long)s->cookie,
		       dc_ksym(s->ip));
	return true;
}

static __attribute__((noinline)) void attr_bits(void)
{
	static const char *const want[] = {
		WORKLOAD_CHAIN, "short_workload", "dc_profile_child", "attr_bits",
		DC_MAIN_FRAMES
	};
	size_t n_user = 0, bad_user = 0, n_kern = 0, bad_kern = 0, matched = 0, last = 0;
	size_t n_max = 0, bad_max = 0, long_rec = 0, rec_max = 0;
	size_t max_leaf = 0, max_norec = 0, max_stop = 0;
	uint64_t last_time = 0, last_cookie = 0;
	struct perf_event_attr attr;
	struct dc_log log = { 0 };

	/* exclude_callchain_user: no user part, no cookie, no record. */
	dc_attr_init(&attr, 250000, true);
	attr.exclude_callchain_user = 1;
	if (dc_profile_child(short_workload, NULL, &attr, 256, &log) < 0)
		ksft_exit_fail_msg("profiling: exclude_callchain_user\n");
	for (size_t i = 0; i < log.nr_samples; i++) {
		struct dc_sample *s = &log.samples[i];

		n_user++;
		bad_user += s->ends_deferred || s->cookie || s->has_user_ctx;
	}
	ksft_print_msg("exclude_callchain_user: %zu samples, %zu with a user part, %zu deferred records\n",
		       n_user, bad_user, log.nr_deferred);
	ksft_test_result(n_user && !bad_user && !log.nr_deferred,
			 "exclude_callchain_user: %zu samples without user part or cookie, no deferred record (%zu)\n",
			 n_user, log.nr_deferred);
	dc_log_free(&log);

	/* exclude_callchain_kernel: the marker and cookie alone. */
	dc_attr_init(&attr, 250000, true);
	attr.exclude_callchain_kernel = 1;
	if (dc_profile_child(short_workload, NULL, &attr, 256, &log) < 0)
		ksft_exit_fail_msg("profiling: exclude_callchain_kernel\n");
	for (size_t i = 0; i < log.nr_samples; i++) {
		struct dc_sample *s = &log.samples[i];
		long n;

		n_kern++;
		if (!s->ends_deferred || !s->cookie || s->nr_kernel || s->has_user_ctx) {
			bad_kern++;
			continue;
		}
		dc_find_deferred(&log, s->pid, s->tid, s->cookie, &n);
		if (n == 1)
			matched++;
		else if (!n && in_last_entry(&log, s))
			last++;
		else
			bad_kern++;
	}
	ksft_print_msg("exclude_callchain_kernel: %zu samples, %zu with one record, %zu of the last entry without (the final stop), %zu bad, %zu records\n",
		       n_kern, matched, last, bad_kern, log.nr_deferred);
	ksft_test_result(n_kern && matched && !bad_kern,
			 "exclude_callchain_kernel: %zu samples are PERF_CONTEXT_USER_DEFERRED + cookie only, %zu have their record (%zu of the final stop's entry not yet)\n",
			 n_kern, matched, last);
	dc_log_free(&log);

	/* sample_max_stack caps the sample, not the record. */
	dc_attr_init(&attr, 250000, true);
	attr.sample_max_stack = 2;
	if (dc_profile_child(short_workload, NULL, &attr, 256, &log) < 0)
		ksft_exit_fail_msg("profiling: sample_max_stack\n");
	for (size_t i = 0; i < log.nr_samples; i++)
		if (log.samples[i].cookie && log.samples[i].time >= last_time) {
			last_time = log.samples[i].time;
			last_cookie = log.samples[i].cookie;
		}
	for (size_t i = 0; i < log.nr_samples; i++) {
		struct dc_sample *s = &log.samples[i];
		long cnt;

		n_max++;
		bad_max += s->nr_kernel > 2 || !s->ends_deferred;
		/*
		 * Every cookie its record, but the final stop's (see above).
		 * Here the kernel stack that would show the signal code is
		 * cut to 2 entries, so the evidence is the child's last cookie
		 * alone (counted apart).
		 */
		if (s->ends_deferred &&
		    (dc_find_deferred(&log, s->pid, s->tid, s->cookie, &cnt) < 0 || cnt != 1)) {
			if (!cnt && s->cookie == last_cookie)
				max_stop++;
			else
				max_norec++;
		}
	}
	/*
	 * Every record of the leaf, not just one, is the whole chain with
	 * its length (without workload_c at the leaf's frameless entry/exit).
	 */
	for (size_t i = 0; i < log.nr_deferred; i++) {
		struct dc_deferred *d = &log.deferred[i];
		bool frameless;
		int r;

		if (d->nr > rec_max)
			rec_max = d->nr;
		r = dc_check_leaf_record(d, "workload_leaf", want,
					 sizeof(want) / sizeof(want[0]), &frameless);
		max_leaf += r >= 0;
		long_rec += r == 1;
		if (!r && max_leaf - long_rec == 1)
			dc_print_merged(&(struct dc_sample){ .pid = d->pid, .tid = d->tid,
					.cookie = d->cookie }, d);
	}
	ksft_print_msg("sample_max_stack 2: %zu samples, %zu with more than 2 kernel entries, %zu without their record (%zu more of the last cookie: the final stop's entry), %zu records, %zu in the leaf, %zu of them the whole workload chain, longest %zu entries\n",
		       n_max, bad_max, max_norec, max_stop, log.nr_deferred, max_leaf,
		       long_rec, rec_max);
	ksft_test_result(n_max && !bad_max && !max_norec && max_leaf * 2 >= log.nr_deferred &&
			 long_rec == max_leaf,
			 "sample_max_stack 2: samples keep at most 2 kernel entries, every cookie has its record, all %zu leaf records are the whole user stack (up to %zu entries)\n",
			 long_rec, rec_max);
	dc_log_free(&log);
}

static void no_sample_id_all(void)
{
	struct perf_event_attr attr;
	struct dc_log log = { 0 };
	size_t one = 0, stopping = 0, bad = 0;

	dc_attr_init(&attr, 250000, true);
	attr.sample_id_all = 0;
	dc_sample_id_all = false;
	if (dc_profile_child(short_workload, NULL, &attr, 256, &log) < 0)
		ksft_exit_fail_msg("profiling: no sample_id_all\n");
	dc_sample_id_all = true;
	for (size_t i = 0; i < log.nr_samples; i++) {
		size_t n = 0;

		for (size_t j = 0; j < log.nr_deferred; j++)
			n += log.deferred[j].cookie == log.samples[i].cookie;
		if (n == 1)
			one++;
		else if (!n && dc_in_final_stop(&log, &log.samples[i]))
			stopping++;	/* see deferred_task.c */
		else
			bad++;
	}
	ksft_print_msg("no sample_id_all: %zu samples, %zu deferred records, %zu samples with exactly one record of their cookie, %zu in the final stop, %zu others, %llu malformed\n",
		       log.nr_samples, log.nr_deferred, one, stopping, bad,
		       (unsigned long long)log.malformed);
	ksft_test_result(log.nr_deferred && !log.malformed && one && !bad,
			 "no sample_id_all: %zu deferred records of exactly header + cookie + nr + ips (%llu not), %zu of %zu samples with exactly one record of their cookie (%zu in the final stop)\n",
			 log.nr_deferred, (unsigned long long)log.malformed, one,
			 log.nr_samples, stopping);
	dc_log_free(&log);
}

/* The linker's bounds of .init_array (a static binary: not relocated). */
extern const uint64_t __init_array_start[];

/*
 * Without defer_callchain, perf walks the user stack in place (x86
 * perf_callchain_user()), which has no upward-only check: after main it
 * follows main's saved %rbp into .init_array (see DC_MAIN_FRAMES) and
 * reads two more "return addresses" before it stops: the word after
 * __init_array_start (the .fini_array entry, __do_global_dtors_aux), then
 * the word 8 bytes into the function the .init_array entry points to
 * (frame_dummy's code bytes), both read here from our own image.
 */
static bool in_place_tail(const uint64_t *ips, uint32_t nr)
{
	const uint64_t *next = (const uint64_t *)(uintptr_t)__init_array_start[0];

	return nr == 2 && ips[0] == __init_array_start[1] && ips[1] == next[1];
}

static __attribute__((noinline)) void classic_user_callchain(void)
{
	/* The whole stack, then in_place_tail(). */
	static const char *const want[] = {
		WORKLOAD_CHAIN, "short_workload", "dc_profile_child",
		"classic_user_callchain", DC_MAIN_FRAMES
	};
	const uint32_t nwant = sizeof(want) / sizeof(want[0]);
	size_t marked = 0, in_place = 0, leaf = 0, exact = 0;
	uint64_t leaf_addr, leaf_size;
	struct perf_event_attr attr;
	struct dc_log log = { 0 };
	int where;

	leaf_addr = dc_sym_addr("workload_leaf", &leaf_size);
	dc_attr_init(&attr, 250000, true);
	attr.defer_callchain = 0;
	if (!leaf_addr || dc_profile_child(short_workload, NULL, &attr, 256, &log) < 0)
		ksft_exit_fail_msg("profiling: no defer_callchain\n");
	for (size_t i = 0; i < log.nr_samples; i++) {
		struct dc_sample *s = &log.samples[i];
		uint32_t u = 0;

		marked += s->ends_deferred || s->cookie;
		in_place += s->has_user_ctx;
		/* The user part follows the kernel part in kernel[]. */
		while (u < s->nr_kernel && s->kernel[u] >= DC_USER_MAX)
			u++;
		if (u < s->nr_kernel && s->kernel[u] >= leaf_addr &&
		    s->kernel[u] < leaf_addr + leaf_size &&
		    !dc_ip_frameless(s->kernel[u], leaf_addr, leaf_size)) {
			leaf++;
			if (dc_stack_starts_with(&s->kernel[u], s->nr_kernel - u,
						 want, nwant, &where) &&
			    in_place_tail(&s->kernel[u + nwant],
					  s->nr_kernel - u - nwant)) {
				exact++;
			} else if (leaf - exact == 1) {
				ksft_print_msg("in-place user stack wrong (frame %d, or the words after main):\n",
					       where);
				for (uint32_t j = u; j < s->nr_kernel; j++)
					ksft_print_msg("  %016llx %s\n",
						       (unsigned long long)s->kernel[j],
						       dc_sym(j > u ? s->kernel[j] - 1 : s->kernel[j],
							      NULL) ?: "?");
			}
		}
	}
	ksft_print_msg("no defer_callchain: %zu samples, %zu with a user part in place, %zu with a cookie, %zu deferred records, %zu leaf samples (%zu exact)\n",
		       log.nr_samples, in_place, marked, log.nr_deferred, leaf, exact);
	ksft_test_result(log.nr_samples && in_place == log.nr_samples && !marked &&
			 !log.nr_deferred && leaf && exact == leaf,
			 "no defer_callchain: all %zu samples have their user stack in place (%zu leaf samples, %zu exact), no cookie, no deferred record\n",
			 log.nr_samples, leaf, exact);
	dc_log_free(&log);
}

int main(void)
{
	ksft_print_header();
	ksft_set_plan(7);
	dc_kallsyms_load();
	if (dc_syms_load())
		ksft_exit_fail_msg("cannot read own symbol table\n");
	one_record_per_entry();
	no_defer_output();
	attr_bits();
	no_sample_id_all();
	classic_user_callchain();
	dc_finished();
}
