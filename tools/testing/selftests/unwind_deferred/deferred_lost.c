// SPDX-License-Identifier: GPL-2.0
/*
 * Deferred callchains when the ring buffer overflows.
 *
 * A child runs the workload in NR_THREADS threads under 10 kHz cpu-clock
 * events, one per CPU (as perf record opens them), inherited by the
 * threads, so that the samples and deferred records of all threads on a
 * CPU go to that CPU's ring.  Each ring has a single data page, and the
 * parent reads them only every DRAIN_MS: between two reads a page fills
 * within a few milliseconds and the kernel drops whatever does not fit,
 * then writes a PERF_RECORD_LOST once there is room again.
 *
 * Records are dropped one by one, so a sample may arrive without its
 * PERF_RECORD_CALLCHAIN_DEFERRED and a deferred record without any of its
 * samples.  Each such orphan needs its own evidence, a lost record that
 * may have dropped the missing item: the rule of dc_orphan_evidence()
 * (dc_util.h), which takes the rings' CPUs into account (a thread's
 * record goes to the ring of the CPU its task_work ran on, not
 * necessarily its sample's), by time: the events use CLOCK_MONOTONIC,
 * one clock on every CPU, and read_format PERF_FORMAT_LOST, so that drops
 * at the very end, which no PERF_RECORD_LOST reports (nothing was written
 * to the ring after them), are counted too (dc_ring_read_lost()).  An
 * orphan sample of its thread's last entry taken on the way into the final
 * SIGSTOP after the task_work ran (get_signal on its kernel stack, the
 * thread's last cookie: dc_in_final_stop(), see deferred_task.c) needs no
 * lost record: its record is due at a return to user space that never
 * comes.  Every other orphan without evidence fails, printed with its
 * thread, cookie, ring, time and window.  As a count check besides, the
 * cookies of orphan samples (each lost its record) plus the orphan
 * records (each lost at least one sample) are at most the records lost.
 * A sample may be taken after its entry's record was written (the
 * task_work ran, and the entry goes on before it returns to user space:
 * the cookie stays, the record already covers the entry); such samples
 * are counted, and like every sample must have the record's pid/tid.
 * What must hold for everything that did arrive:
 *   - the ring did overflow: PERF_RECORD_LOST with lost > 0; every orphan
 *     has its evidence (or is a final-stop sample), as above, and the
 *     count check holds;
 *   - every sample comes from the child's threads and ends with
 *     PERF_CONTEXT_USER_DEFERRED and a non-zero cookie;
 *   - no cookie appears in two deferred records: one record per kernel
 *     entry, and a cookie is never reused for another entry (of the same
 *     task, nor of another task: cookies are system-wide);
 *   - every sample carrying a record's cookie has the record's pid/tid;
 *   - every deferred record taken in the leaf has the workload's exact
 *     user chain, the whole record down to lost_worker <- start_thread,
 *     where the walk ends (see DC_THREAD_FRAMES), without workload_c at
 *     the leaf's frameless entry/exit, as in deferred_task;
 *   - records are MISC_USER, non-empty, user addresses only, and nothing
 *     is malformed.
 *
 * The threads do not exit while the event is enabled: when done they wait
 * in pause() and the main thread stops the whole child with SIGSTOP (see
 * deferred_task.c), so no entry is lost to the exit path.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest.h"
#include "dc_util.h"
#include "workload.h"

#define PERIOD_NS	100000	/* 10 kHz */
#define RING_PAGES	1
#define DRAIN_MS	50
#define NR_THREADS	3
#define WORK_MS		1000
#define TIMEOUT_MS	120000
#define MIN_SAMPLES	40
#define MIN_MATCHED	10
#define MIN_LEAF	5
#define MAX_CPUS	64

/* start_thread: where a thread's walk ends, see DC_THREAD_FRAMES. */
static const char *const expected[] = {
	WORKLOAD_CHAIN, "lost_worker", "start_thread"
};
#define NR_EXPECTED ((int)ARRAY_SIZE(expected))
static const char *const expected_frameless[] = {
	"workload_leaf", "workload_b", "workload_a", "workload", "lost_worker",
	"start_thread"
};
#define NR_FRAMELESS ((int)ARRAY_SIZE(expected_frameless))

static int workers_done;

/* The workers' start routine: the frame after workload in their chain. */
__attribute__((noinline)) void *lost_worker(void *arg)
{
	workload(WORK_MS);
	asm volatile("" ::: "memory");	/* not a tail call */
	__atomic_add_fetch(&workers_done, 1, __ATOMIC_RELEASE);
	for (;;)
		pause();
	return arg;
}

static void run_child(int go)
{
	pthread_t t[NR_THREADS];
	char c;

	if (read(go, &c, 1) != 1)
		_exit(3);
	/* Created after the event was opened: they inherit it. */
	for (int i = 0; i < NR_THREADS; i++)
		if (pthread_create(&t[i], NULL, lost_worker, NULL))
			_exit(4);
	while (__atomic_load_n(&workers_done, __ATOMIC_ACQUIRE) < NR_THREADS)
		usleep(5000);
	/* Stops every thread; each runs its task_work on the way. */
	raise(SIGSTOP);
	_exit(0);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000ULL + ts.tv_nsec / 1000000;
}

/*
 * Like dc_profile_child(), but with one event per CPU (the kernel maps no
 * ring of an inherited per-task event, perf record's way), each with its
 * own ring, read only every DRAIN_MS (a sleep, not a poll), so that they
 * overflow in between.
 */
static pid_t profile(struct perf_event_attr *attr, struct dc_log *log,
		     size_t *drains, int *nr_cpus)
{
	struct dc_ring ring[MAX_CPUS];
	uint64_t start = now_ms();
	int go[2], ncpu, st, err = 0, n = 0;
	pid_t pid;

	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu < 1 || ncpu > MAX_CPUS)
		return -ERANGE;
	if (pipe(go))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		close(go[1]);
		run_child(go[0]);
	}
	close(go[0]);

	for (n = 0; n < ncpu; n++) {
		int fd = dc_open(attr, pid, n, -1, 0);

		if (fd < 0) {
			err = -errno;
			goto out;
		}
		if (dc_ring_map(&ring[n], fd, RING_PAGES, n)) {
			err = -errno;
			close(fd);
			goto out;
		}
	}
	for (int i = 0; i < ncpu; i++)
		if (ioctl(ring[i].fd, PERF_EVENT_IOC_ENABLE, 0))
			err = -errno;
	if (err || write(go[1], "g", 1) != 1) {
		err = err ? err : -errno;
		goto out;
	}
	for (;;) {
		pid_t w;

		usleep(DRAIN_MS * 1000);
		for (int i = 0; i < ncpu; i++)
			dc_ring_drain(&ring[i], log);
		(*drains)++;
		w = waitpid(pid, &st, WUNTRACED | WNOHANG);
		if (w == pid && WIFSTOPPED(st))
			break;
		if (w == pid) {
			err = -ECHILD;	/* died instead of stopping */
			break;
		}
		if (now_ms() - start > TIMEOUT_MS) {
			err = -ETIMEDOUT;
			break;
		}
	}
	for (int i = 0; i < ncpu; i++)
		ioctl(ring[i].fd, PERF_EVENT_IOC_DISABLE, 0);
	for (int i = 0; i < ncpu; i++)
		dc_ring_drain(&ring[i], log);
	/* Drops after the last record written to a ring: no LOST says so. */
	for (int i = 0; i < ncpu && !err; i++)
		if (dc_ring_read_lost(&ring[i], log) < 0)
			err = -EIO;
out:
	for (int i = 0; i < n; i++) {
		dc_ring_unmap(&ring[i]);
		close(ring[i].fd);
	}
	close(go[1]);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	*nr_cpus = ncpu;
	return err ? err : pid;
}

struct figures {
	size_t no_cookie, bad_pid, orphan_samples, orphan_cookies, after_record;
	size_t matched, orphan_records, dup_task, dup_other, tid_mismatch;
	size_t leaf, leaf_matched, frameless, exact, bad_chain, bad_rec;
	size_t tids;
	/* orphans: explained by a lost record, final stop, without evidence */
	size_t lost_samples, lost_cookies, stop_samples, stop_cookies;
	size_t bare_samples, bare_cookies, lost_records, bare_records;
};

#define MAX_PRINTED	10

static void print_orphan(const char *what, uint32_t tid, uint64_t cookie,
			 int ring, uint64_t time, uint64_t lo, uint64_t hi)
{
	ksft_print_msg("%s: tid %u cookie %#llx ring %d time %llu; its entry ran between %llu and %llu (its thread's items of other entries; 0 / %llu: none), no lost record of any ring there\n",
		       what, tid, (unsigned long long)cookie, ring,
		       (unsigned long long)time, (unsigned long long)lo,
		       (unsigned long long)hi, (unsigned long long)UINT64_MAX);
}

/* Is sample @i the first of the log with its cookie? */
static bool first_of_cookie(const struct dc_log *log, size_t i)
{
	for (size_t j = 0; j < i; j++)
		if (log->samples[j].cookie == log->samples[i].cookie)
			return false;
	return true;
}

static void check_records(struct dc_log *log, struct figures *f)
{
	for (size_t i = 0; i < log->nr_deferred; i++) {
		struct dc_deferred *a = &log->deferred[i];

		for (size_t j = i + 1; j < log->nr_deferred; j++) {
			struct dc_deferred *b = &log->deferred[j];

			if (a->cookie != b->cookie)
				continue;
			if (a->pid == b->pid && a->tid == b->tid)
				f->dup_task++;
			else
				f->dup_other++;
			if (f->dup_task + f->dup_other <= 3)
				ksft_print_msg("cookie %#llx in deferred records %zu (tid %u) and %zu (tid %u)\n",
					       (unsigned long long)a->cookie,
					       i + 1, a->tid, j + 1, b->tid);
		}
	}
}

static void check_samples(struct dc_log *log, pid_t pid, struct figures *f)
{
	for (size_t i = 0; i < log->nr_samples; i++) {
		struct dc_sample *s = &log->samples[i];
		bool found = false;

		if (s->pid != (uint32_t)pid)
			f->bad_pid++;
		if (!s->ends_deferred || !s->cookie || s->has_user_ctx) {
			f->no_cookie++;
			continue;
		}
		/* By cookie alone: its records must all be this task's. */
		for (size_t j = 0; j < log->nr_deferred; j++) {
			struct dc_deferred *d = &log->deferred[j];

			if (d->cookie != s->cookie)
				continue;
			found = true;
			d->matched++;
			if (s->time > d->time && !f->after_record++) {
				ksft_print_msg("sample %zu taken %llu ns after its record was written:\n",
					       i + 1, (unsigned long long)(s->time - d->time));
				dc_print_merged(s, NULL);
			}
			if (d->pid == s->pid && d->tid == s->tid)
				continue;
			if (f->tid_mismatch++ < 3)
				ksft_print_msg("sample %zu (pid %u tid %u) has the cookie %#llx of a record of pid %u tid %u\n",
					       i + 1, s->pid, s->tid,
					       (unsigned long long)s->cookie,
					       d->pid, d->tid);
		}
		if (!found) {
			/* Distinct cookies: one lost record each. */
			bool first = first_of_cookie(log, i);
			const struct dc_lost *l;
			uint64_t lo, hi;

			if (dc_in_final_stop(log, s)) {
				f->stop_samples++;
				f->stop_cookies += first;
				if (f->stop_samples <= 3) {
					ksft_print_msg("orphan sample %zu excused: final stop (its thread's last cookie, get_signal on its stack, task_work already ran)\n",
						       i + 1);
					dc_print_merged(s, NULL);
				}
				continue;
			}
			f->orphan_samples++;
			f->orphan_cookies += first;
			l = dc_orphan_evidence(log, s->pid, s->tid, s->cookie,
					       s->time, &lo, &hi);
			if (l) {
				f->lost_samples++;
				f->lost_cookies += first;
				if (f->lost_samples == 1) {
					ksft_print_msg("first orphan sample explained: tid %u cookie %#llx ring %d time %llu, entry between %llu and %llu\n",
						       s->tid, (unsigned long long)s->cookie,
						       s->ring, (unsigned long long)s->time,
						       (unsigned long long)lo,
						       (unsigned long long)hi);
					dc_print_lost("  by", l);
				}
				continue;
			}
			f->bare_samples++;
			f->bare_cookies += first;
			if (f->bare_samples <= MAX_PRINTED)
				print_orphan("orphan sample without evidence", s->tid,
					     s->cookie, s->ring, s->time, lo, hi);
		}
	}
}

static void check_stacks(struct dc_log *log, struct figures *f)
{
	uint64_t leaf, leaf_size;
	uint32_t tids[64];
	size_t nr_tids = 0;

	leaf = dc_sym_addr("workload_leaf", &leaf_size);
	for (size_t i = 0; i < log->nr_deferred; i++) {
		struct dc_deferred *d = &log->deferred[i];
		bool fl, ok, seen = false;
		int where;

		if (d->matched) {
			f->matched++;
		} else {
			const struct dc_lost *l;
			uint64_t lo, hi;

			f->orphan_records++;
			l = dc_orphan_evidence(log, d->pid, d->tid, d->cookie,
					       d->time, &lo, &hi);
			if (l) {
				f->lost_records++;
			} else if (f->bare_records++ < MAX_PRINTED) {
				print_orphan("orphan record without evidence", d->tid,
					     d->cookie, d->ring, d->time, lo, hi);
			}
		}
		if (d->misc != PERF_RECORD_MISC_USER || !d->nr)
			f->bad_rec++;
		for (uint32_t j = 0; j < d->nr; j++)
			if (d->ips[j] >= DC_USER_MAX)
				f->bad_rec++;
		for (size_t j = 0; j < nr_tids; j++)
			seen |= tids[j] == d->tid;
		if (d->matched && !seen && nr_tids < 64)
			tids[nr_tids++] = d->tid;

		if (!d->nr || d->ips[0] < leaf || d->ips[0] >= leaf + leaf_size)
			continue;
		/* Taken in the leaf: the workload's chain, matched or not. */
		f->leaf++;
		f->leaf_matched += !!d->matched;
		fl = dc_ip_frameless(d->ips[0], leaf, leaf_size);
		f->frameless += fl;
		ok = fl ? dc_stack_is(d->ips, d->nr, expected_frameless,
				      NR_FRAMELESS, &where) :
			  dc_stack_is(d->ips, d->nr, expected, NR_EXPECTED,
				      &where);
		if (ok) {
			f->exact++;
			continue;
		}
		if (f->bad_chain++ < 3) {
			ksft_print_msg("deferred record %zu (cookie %#llx, %d samples): wrong frame %d\n",
				       i + 1, (unsigned long long)d->cookie,
				       d->matched, where);
			dc_print_merged(&(struct dc_sample){ .pid = d->pid,
					.tid = d->tid, .cookie = d->cookie }, d);
		}
	}
	f->tids = nr_tids;
}

static uint64_t pending_lost(const struct dc_log *log)
{
	uint64_t n = 0;

	for (size_t i = 0; i < log->nr_losts; i++)
		n += log->losts[i].pending ? log->losts[i].lost : 0;
	return n;
}

int main(void)
{
	struct perf_event_attr attr;
	struct dc_log log = { 0 };
	struct figures f = { 0 };
	size_t drains = 0, mismatches;
	int nr_cpus = 0;
	pid_t pid;

	ksft_print_header();
	ksft_set_plan(6);
	if (dc_syms_load() || !dc_sym_addr("workload_leaf", NULL))
		ksft_exit_fail_msg("cannot read own symbol table\n");
	dc_kallsyms_load();

	dc_attr_init(&attr, PERIOD_NS, true);
	attr.inherit = 1;
	/* One clock on every CPU, and the drops no LOST record reports. */
	attr.use_clockid = 1;
	attr.clockid = CLOCK_MONOTONIC;
	attr.read_format = PERF_FORMAT_LOST;
	pid = profile(&attr, &log, &drains, &nr_cpus);
	if (pid < 0)
		ksft_exit_fail_msg("profiling the workload: %s\n", strerror(-pid));

	check_records(&log, &f);
	check_samples(&log, pid, &f);
	check_stacks(&log, &f);
	mismatches = f.dup_task + f.dup_other + f.tid_mismatch + f.bad_chain;

	ksft_print_msg("%d threads, %d CPUs, one ring of %d data page per CPU, read every %d ms (%zu reads)\n",
		       NR_THREADS, nr_cpus, RING_PAGES, DRAIN_MS, drains);
	ksft_print_msg("samples %zu, deferred records %zu, matched %zu (of %zu threads), orphan samples %zu (%zu cookies), orphan records %zu\n",
		       log.nr_samples, log.nr_deferred, f.matched, f.tids,
		       f.orphan_samples, f.orphan_cookies, f.orphan_records);
	ksft_print_msg("orphans explained by a lost record: %zu samples (%zu cookies), %zu records; without evidence: %zu samples (%zu cookies), %zu records; final-stop samples excused %zu (%zu cookies)\n",
		       f.lost_samples, f.lost_cookies, f.lost_records,
		       f.bare_samples, f.bare_cookies, f.bare_records,
		       f.stop_samples, f.stop_cookies);
	ksft_print_msg("lost: %llu PERF_RECORD_LOST, %llu records lost in all (%llu of them after the ring's last record, reported by no LOST: PERF_FORMAT_LOST)\n",
		       (unsigned long long)log.lost_records,
		       (unsigned long long)log.lost,
		       (unsigned long long)pending_lost(&log));
	ksft_print_msg("records in the leaf %zu (%zu with samples, %zu at its frameless entry/exit), exact chains %zu; samples taken after their record was written %zu\n",
		       f.leaf, f.leaf_matched, f.frameless, f.exact,
		       f.after_record);
	ksft_print_msg("mismatches %zu: cookie twice in one task %zu, in two tasks %zu, sample/record tid %zu, wrong chain %zu\n",
		       mismatches, f.dup_task, f.dup_other, f.tid_mismatch,
		       f.bad_chain);

	ksft_test_result(log.lost_records && log.lost && log.nr_samples >= MIN_SAMPLES &&
			 !f.bare_samples && !f.bare_records &&
			 f.orphan_cookies + f.orphan_records <= log.lost,
			 "ring overflowed: %llu PERF_RECORD_LOST (%llu lost), %zu samples (>= %d) and %zu deferred records arrived; every orphan explained by a lost record in its entry's time (%zu samples, %zu records without; %zu final-stop samples excused); %zu orphan cookies + %zu orphan records <= %llu lost\n",
			 (unsigned long long)log.lost_records,
			 (unsigned long long)log.lost, log.nr_samples,
			 MIN_SAMPLES, log.nr_deferred, f.bare_samples,
			 f.bare_records, f.stop_samples, f.orphan_cookies,
			 f.orphan_records, (unsigned long long)log.lost);
	ksft_test_result(!f.bad_pid && !f.no_cookie,
			 "every sample is the child's (%zu not) and ends with PERF_CONTEXT_USER_DEFERRED + non-zero cookie (%zu do not)\n",
			 f.bad_pid, f.no_cookie);
	ksft_test_result(!f.dup_task && !f.dup_other,
			 "no cookie in two deferred records: %zu in one task, %zu in two tasks\n",
			 f.dup_task, f.dup_other);
	ksft_test_result(!f.tid_mismatch && f.matched >= MIN_MATCHED && f.tids >= 2,
			 "every sample with a record's cookie has its pid/tid (%zu not); %zu records matched (>= %d) in %zu threads (>= 2)\n",
			 f.tid_mismatch, f.matched, MIN_MATCHED, f.tids);
	ksft_test_result(!f.bad_chain && f.leaf_matched >= MIN_LEAF,
			 "all %zu deferred records in the leaf (%zu with samples, >= %d) are exactly %s <- %s <- %s <- %s <- %s <- %s <- %s (without %s in the %zu frameless)\n",
			 f.leaf, f.leaf_matched, MIN_LEAF, expected[0],
			 expected[1], expected[2], expected[3], expected[4],
			 expected[5], expected[6], expected[1], f.frameless);
	ksft_test_result(!f.bad_rec && !log.malformed,
			 "deferred records are MISC_USER, non-empty, user addresses only (%zu bad); %llu malformed\n",
			 f.bad_rec, (unsigned long long)log.malformed);

	dc_log_free(&log);
	ksft_finished();
}
