// SPDX-License-Identifier: GPL-2.0
/*
 * Two profiling sessions at once on the same task, as two profilers
 * would open them, both with defer_callchain and defer_output:
 *
 *   session A: one per-task event on the child (like perf record -p),
 *   session B: one CPU-wide event per online CPU (like perf record -a);
 *              these also set attr.comm, so that they receive side-band
 *              records (see deferred_cpu.c).
 *
 * Their cpu-clock periods differ, so they sample at different times.  The
 * child makes long reads of /dev/zero (long kernel entries that both
 * sessions sample) and runs the workload (short entries), pinned to one
 * CPU so that all its sample times come from one CPU's clock.  Checked:
 * - in each session, every sample of the child ends with
 *   PERF_CONTEXT_USER_DEFERRED and a cookie, and its cookie has exactly
 *   one deferred record of its pid/tid in that session's rings;
 * - neither session loses a record (PERF_RECORD_LOST) with rings big
 *   enough;
 * - the two sessions see the same cookie for samples of the same kernel
 *   entry: some cookies are seen by both, and with the samples of both
 *   sessions in time order, a cookie never comes back once another
 *   cookie was seen (one cookie per entry, entries do not overlap); the
 *   records of a cookie in the two sessions are identical;
 * - every long read is one kernel entry with one cookie, and no other
 *   entry has it: the child stamps CLOCK_MONOTONIC around each read,
 *   both sessions' events time their samples by the same clock
 *   (use_clockid), and the samples taken inside a read (ksys_read on
 *   their kernel stack) of both sessions must carry that read's single
 *   cookie, a different one for every read;
 * - every record of the child, in either session, has a sample in one
 *   of them.  A session also receives the records of cookies only the
 *   other session sampled (a record reaches every event of the task that
 *   asked for deferred output, whichever session's sample requested the
 *   unwind): counted, and each of them must have its sample in the other
 *   session.
 * The child stops itself (SIGSTOP) before the events are disabled; see
 * deferred_task.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest.h"
#include "dc_util.h"
#include "workload.h"

#define NR_READS	6
#define READ_SIZE	(8 << 20)
#define WORK_MS		300
#define PERIOD_A_NS	250000	/* 4 kHz */
#define PERIOD_B_NS	370000	/* 2.7 kHz per CPU */
#define RING_PAGES	512
#define MAX_CPUS	64
#define MIN_SAMPLES	20
#define TIMEOUT_S	120

struct reads {
	int fd;
	char *buf;
	uint64_t *stamps;	/* shared: CLOCK_MONOTONIC before, after read i */
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

__attribute__((noinline)) int sessions_read_leaf(struct reads *r)
{
	int bad = 0;

	DC_KEEP_FRAME();
	for (int i = 0; i < NR_READS; i++) {
		long ret;

		/*
		 * Every read faults the whole buffer in again (fresh anonymous
		 * memory mapped over it; the test kernels have no madvise()):
		 * all reads are long, not just the first (copy on write after
		 * fork), so every read is sampled.
		 */
		if (mmap(r->buf, READ_SIZE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != r->buf)
			return -1;
		r->stamps[2 * i] = mono_ns();
		ret = dc_syscall3(__NR_read, r->fd, (long)r->buf, READ_SIZE);
		r->stamps[2 * i + 1] = mono_ns();
		bad += ret != READ_SIZE;
	}
	return bad;
}

__attribute__((noinline)) void run_child(struct reads *r)
{
	if (sessions_read_leaf(r))
		_exit(4);
	asm volatile("" ::: "memory");
	workload(WORK_MS);
	asm volatile("" ::: "memory");
}

struct session {
	const char *name;
	struct dc_ring rings[MAX_CPUS];
	int nr_rings;
	struct dc_log log;
	/* figures for the child */
	size_t samples, bad_ctx, matched, missing, dup, stopping, records;
};

static int cpus[MAX_CPUS], nr_cpus;
static struct session sa = { .name = "A per-task" };
static struct session sb = { .name = "B CPU-wide" };

static void open_sessions(pid_t pid)
{
	struct perf_event_attr attr;
	int err;

	dc_attr_init(&attr, PERIOD_A_NS, true);
	attr.use_clockid = 1;
	attr.clockid = CLOCK_MONOTONIC;
	err = dc_ring_open(&sa.rings[0], &attr, pid, -1, RING_PAGES, 0);
	if (err)
		ksft_exit_fail_msg("session A: %s\n", strerror(-err));
	sa.nr_rings = 1;

	dc_attr_init(&attr, PERIOD_B_NS, true);
	attr.use_clockid = 1;
	attr.clockid = CLOCK_MONOTONIC;
	attr.comm = 1;
	for (int i = 0; i < nr_cpus; i++) {
		err = dc_ring_open(&sb.rings[i], &attr, -1, cpus[i], RING_PAGES, i);
		if (err)
			ksft_exit_fail_msg("session B, CPU %d: %s\n", cpus[i],
					   strerror(-err));
	}
	sb.nr_rings = nr_cpus;
}

/* Per-session checks of the child's samples. */
static void check_session(struct session *s, pid_t pid)
{
	struct dc_log *log = &s->log;

	for (size_t i = 0; i < log->nr_samples; i++) {
		struct dc_sample *x = &log->samples[i];
		long idx, n;

		if (x->pid != (uint32_t)pid)
			continue;
		s->samples++;
		if (x->tid != (uint32_t)pid || !x->ends_deferred || !x->cookie ||
		    x->has_user_ctx) {
			s->bad_ctx++;
			continue;
		}
		idx = dc_find_deferred(log, x->pid, x->tid, x->cookie, &n);
		if (idx < 0 && dc_in_final_stop(log, x)) {
			if (!s->stopping++) {
				ksft_print_msg("%s: sample %zu: cookie %#llx, in the last entry on the way into the stop after its task_work ran:\n",
					       s->name, i, (unsigned long long)x->cookie);
				dc_print_merged(x, NULL);
			}
			continue;
		}
		if (idx < 0) {
			if (s->missing++ < 3) {
				ksft_print_msg("%s: sample %zu: cookie %#llx has no deferred record\n",
					       s->name, i, (unsigned long long)x->cookie);
				dc_print_merged(x, NULL);
			}
			continue;
		}
		s->dup += n > 1;
		s->matched++;
		log->deferred[idx].matched++;
	}
	for (size_t i = 0; i < log->nr_deferred; i++)
		s->records += log->deferred[i].pid == (uint32_t)pid;
}

static bool has_sample(const struct dc_log *log, const struct dc_deferred *d)
{
	for (size_t i = 0; i < log->nr_samples; i++)
		if (log->samples[i].cookie == d->cookie &&
		    log->samples[i].pid == d->pid && log->samples[i].tid == d->tid)
			return true;
	return false;
}

struct stamp {
	uint64_t time, cookie;
	int session;
};

static int stamp_cmp(const void *a, const void *b)
{
	const struct stamp *x = a, *y = b;

	return (x->time > y->time) - (x->time < y->time);
}

static int u64_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return (*x > *y) - (*x < *y);
}

/*
 * With the child's samples of both sessions in time order, count the
 * samples whose cookie comes back after another cookie (an entry that
 * would overlap another), and the cookies whose samples go from one
 * session to the other and back ("interleaved": a sample of one session
 * between two of the other's, in one entry).
 */
static size_t order_violations(pid_t pid, size_t *interleaved)
{
	const struct session *ss[2] = { &sa, &sb };
	size_t n = 0, nu = 0, bad = 0;
	struct cookie_run {
		bool closed;
		int last;	/* session of its last sample, -1: none */
		int switches;
	} *run;
	struct stamp *st;
	uint64_t *uniq;

	st = calloc(sa.log.nr_samples + sb.log.nr_samples + 1, sizeof(*st));
	uniq = calloc(sa.log.nr_samples + sb.log.nr_samples + 1, sizeof(*uniq));
	if (!st || !uniq)
		ksft_exit_fail_msg("out of memory\n");
	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < ss[k]->log.nr_samples; i++) {
			const struct dc_sample *x = &ss[k]->log.samples[i];

			if (x->pid != (uint32_t)pid || !x->cookie)
				continue;
			st[n] = (struct stamp){ x->time, x->cookie, k };
			uniq[n++] = x->cookie;
		}
	qsort(st, n, sizeof(*st), stamp_cmp);
	qsort(uniq, n, sizeof(*uniq), u64_cmp);
	for (size_t i = 0; i < n; i++)
		if (!nu || uniq[nu - 1] != uniq[i])
			uniq[nu++] = uniq[i];
	run = calloc(nu + 1, sizeof(*run));
	if (!run)
		ksft_exit_fail_msg("out of memory\n");
	for (size_t c = 0; c < nu; c++)
		run[c].last = -1;

	*interleaved = 0;
	for (size_t i = 0; i < n; i++) {
		struct cookie_run *r = &run[(uint64_t *)bsearch(&st[i].cookie, uniq, nu,
					     sizeof(*uniq), u64_cmp) - uniq];

		if (i && st[i - 1].cookie != st[i].cookie)
			run[(uint64_t *)bsearch(&st[i - 1].cookie, uniq, nu,
						sizeof(*uniq), u64_cmp) - uniq].closed = true;
		if (r->closed) {
			if (bad++ < 3)
				ksft_print_msg("cookie %#llx (session %c, time %llu) seen again after another cookie\n",
					       (unsigned long long)st[i].cookie,
					       'A' + st[i].session,
					       (unsigned long long)st[i].time);
			continue;
		}
		if (r->last >= 0 && r->last != st[i].session && ++r->switches == 2)
			(*interleaved)++;
		r->last = st[i].session;
	}
	free(run);
	free(uniq);
	free(st);
	return bad;
}

/*
 * The samples of both sessions taken inside the child's reads: each must
 * fall inside one read's stamps and carry that read's cookie, one per
 * read, a different one per read.  Returns the violations; *sampled is
 * the number of reads with samples.
 */
static size_t read_entries(pid_t pid, const uint64_t *stamps, size_t *sampled,
			   size_t *in_reads)
{
	const struct session *ss[2] = { &sa, &sb };
	uint64_t cookie[NR_READS] = { 0 }, leaf, leaf_size;
	size_t bad = 0;

	leaf = dc_sym_addr("sessions_read_leaf", &leaf_size);
	*sampled = *in_reads = 0;
	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < ss[k]->log.nr_samples; i++) {
			const struct dc_sample *x = &ss[k]->log.samples[i];
			const struct dc_deferred *d;
			long idx, n;
			int r;

			if (x->pid != (uint32_t)pid || !x->cookie ||
			    !dc_kernel_stack_has(x, "ksys_read"))
				continue;
			/*
			 * One of the leaf's reads, by its record's first frame
			 * (the child's read of its start pipe is in libc's
			 * read()).  A sample without its record fails test 1.
			 */
			idx = dc_find_deferred((struct dc_log *)&ss[k]->log, x->pid, x->tid,
					       x->cookie, &n);
			if (idx < 0)
				continue;
			d = &ss[k]->log.deferred[idx];
			if (!d->nr || d->ips[0] < leaf || d->ips[0] >= leaf + leaf_size)
				continue;
			(*in_reads)++;
			for (r = 0; r < NR_READS; r++)
				if (x->time >= stamps[2 * r] && x->time <= stamps[2 * r + 1])
					break;
			if (r == NR_READS) {
				if (bad++ < 3) {
					ksft_print_msg("%s: sample in read at %llu, inside no read's stamps:\n",
						       ss[k]->name, (unsigned long long)x->time);
					for (r = 0; r < NR_READS; r++)
						ksft_print_msg("  read %d: %llu .. %llu\n", r,
							       (unsigned long long)stamps[2 * r],
							       (unsigned long long)stamps[2 * r + 1]);
					dc_print_merged(x, NULL);
				}
				continue;
			}
			if (!cookie[r]) {
				cookie[r] = x->cookie;
				(*sampled)++;
			} else if (cookie[r] != x->cookie && bad++ < 3) {
				ksft_print_msg("%s: read %d has cookies %#llx and %#llx\n",
					       ss[k]->name, r, (unsigned long long)cookie[r],
					       (unsigned long long)x->cookie);
			}
		}
	for (int a = 0; a < NR_READS; a++)
		for (int b = a + 1; b < NR_READS; b++)
			if (cookie[a] && cookie[a] == cookie[b] && bad++ < 3)
				ksft_print_msg("reads %d and %d share cookie %#llx\n", a, b,
					       (unsigned long long)cookie[a]);
	return bad;
}

int main(void)
{
	size_t both = 0, differ = 0, orphan = 0, only_other[2] = { 0 };
	size_t interleaved, bad_order, bad_reads, reads_sampled, in_reads;
	int go[2], st;
	struct reads r;
	cpu_set_t set;
	time_t t0;
	pid_t pid;

	ksft_print_header();
	ksft_set_plan(6);
	if (dc_syms_load())
		ksft_exit_fail_msg("cannot read own symbol table\n");
	dc_kallsyms_load();
	nr_cpus = dc_online_cpus(cpus, MAX_CPUS);
	if (nr_cpus < 1)
		ksft_exit_fail_msg("no online CPUs\n");

	r.fd = open("/dev/zero", O_RDONLY);
	r.buf = mmap(NULL, READ_SIZE, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	r.stamps = mmap(NULL, 2 * NR_READS * sizeof(uint64_t), PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (r.fd < 0 || r.buf == MAP_FAILED || r.stamps == MAP_FAILED || pipe(go))
		ksft_exit_fail_msg("set-up: %s\n", strerror(errno));

	pid = fork();
	if (pid < 0)
		ksft_exit_fail_msg("fork: %s\n", strerror(errno));
	if (pid == 0) {
		char c;

		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(3);
		run_child(&r);
		asm volatile("" ::: "memory");
		raise(SIGSTOP);
		_exit(0);
	}
	close(go[0]);
	CPU_ZERO(&set);
	CPU_SET(cpus[0], &set);
	if (sched_setaffinity(pid, sizeof(set), &set))
		ksft_exit_fail_msg("pinning the child: %s\n", strerror(errno));
	open_sessions(pid);
	if (dc_rings_ioctl(sa.rings, sa.nr_rings, PERF_EVENT_IOC_ENABLE) ||
	    dc_rings_ioctl(sb.rings, sb.nr_rings, PERF_EVENT_IOC_ENABLE) ||
	    write(go[1], "g", 1) != 1)
		ksft_exit_fail_msg("start: %s\n", strerror(errno));

	t0 = time(NULL);
	for (;;) {
		pid_t w;

		dc_rings_poll_drain(sa.rings, sa.nr_rings, &sa.log, 10);
		dc_rings_poll_drain(sb.rings, sb.nr_rings, &sb.log, 0);
		w = waitpid(pid, &st, WUNTRACED | WNOHANG);
		if (w == pid && WIFSTOPPED(st))
			break;
		if (w == pid)
			ksft_exit_fail_msg("child died (status %#x)\n", st);
		if (time(NULL) - t0 > TIMEOUT_S)
			ksft_exit_fail_msg("child did not finish in %d s\n", TIMEOUT_S);
	}
	dc_rings_ioctl(sa.rings, sa.nr_rings, PERF_EVENT_IOC_DISABLE);
	dc_rings_ioctl(sb.rings, sb.nr_rings, PERF_EVENT_IOC_DISABLE);
	dc_rings_poll_drain(sa.rings, sa.nr_rings, &sa.log, 0);
	dc_rings_poll_drain(sb.rings, sb.nr_rings, &sb.log, 0);

	check_session(&sa, pid);
	check_session(&sb, pid);

	/* Cookies of both sessions, and their records in each. */
	for (int k = 0; k < 2; k++) {
		struct session *s = k ? &sb : &sa, *o = k ? &sa : &sb;

		for (size_t i = 0; i < s->log.nr_deferred; i++) {
			struct dc_deferred *d = &s->log.deferred[i];
			bool here = has_sample(&s->log, d), there = has_sample(&o->log, d);
			long idx, n;

			if (d->pid != (uint32_t)pid)
				continue;
			if (!here && !there) {
				orphan++;
				ksft_print_msg("%s: record cookie %#llx has a sample in neither session\n",
					       s->name, (unsigned long long)d->cookie);
			}
			if (!here && there)
				only_other[k]++;
			if (k || !here || !there)
				continue;
			both++;
			idx = dc_find_deferred(&o->log, d->pid, d->tid, d->cookie, &n);
			if (idx < 0 || n != 1 || o->log.deferred[idx].nr != d->nr ||
			    memcmp(o->log.deferred[idx].ips, d->ips,
				   d->nr * sizeof(d->ips[0]))) {
				if (differ++ < 2) {
					ksft_print_msg("cookie %#llx: records differ between the sessions\n",
						       (unsigned long long)d->cookie);
					dc_print_merged(&(struct dc_sample){ .pid = d->pid,
						.tid = d->tid, .cookie = d->cookie }, d);
					if (idx >= 0)
						dc_print_merged(&(struct dc_sample){ .pid = d->pid,
							.tid = d->tid, .cookie = d->cookie },
							&o->log.deferred[idx]);
				}
			}
		}
	}
	bad_order = order_violations(pid, &interleaved);
	bad_reads = read_entries(pid, r.stamps, &reads_sampled, &in_reads);

	for (int k = 0; k < 2; k++) {
		struct session *s = k ? &sb : &sa;

		ksft_print_msg("%s: %d rings, samples %zu (child %zu), deferred records %zu (child %zu), matched samples %zu, mismatches %zu (missing %zu, duplicated %zu, no cookie %zu), in the final stop %zu, child records only the other session sampled %zu, lost %llu\n",
			       s->name, s->nr_rings, s->log.nr_samples, s->samples,
			       s->log.nr_deferred, s->records, s->matched,
			       s->missing + s->dup + s->bad_ctx, s->missing, s->dup,
			       s->bad_ctx, s->stopping, only_other[k],
			       (unsigned long long)s->log.lost);
	}
	ksft_print_msg("cookies seen by both sessions %zu (%zu with their samples interleaved in time), records differing %zu, samples out of entry order %zu, records with no sample in either %zu; %zu samples in %zu of %d reads, read/cookie violations %zu\n",
		       both, interleaved, differ, bad_order, orphan, in_reads,
		       reads_sampled, NR_READS, bad_reads);

	for (int k = 0; k < 2; k++) {
		struct session *s = k ? &sb : &sa;

		ksft_test_result(s->samples >= MIN_SAMPLES && !s->bad_ctx &&
				 !s->missing && !s->dup && s->matched,
				 "%s: %zu child samples (>= %d) with USER_DEFERRED + cookie (%zu not), each with exactly one deferred record in the session's rings (%zu missing, %zu duplicated, %zu in the final stop)\n",
				 s->name, s->samples, MIN_SAMPLES, s->bad_ctx,
				 s->missing, s->dup, s->stopping);
	}
	ksft_test_result(!sa.log.lost && !sa.log.lost_records && !sa.log.malformed &&
			 !sb.log.lost && !sb.log.lost_records && !sb.log.malformed,
			 "no record lost (A %llu, B %llu) or malformed (A %llu, B %llu)\n",
			 (unsigned long long)sa.log.lost,
			 (unsigned long long)sb.log.lost,
			 (unsigned long long)sa.log.malformed,
			 (unsigned long long)sb.log.malformed);
	ksft_test_result(both && !differ,
			 "%zu cookies seen by both sessions, their records identical in both (%zu differ)\n",
			 both, differ);
	ksft_test_result(!bad_order && !bad_reads && reads_sampled >= 2,
			 "both sessions' samples in time order: one cookie per kernel entry (%zu samples out of order, %zu shared cookies interleaved); each of %zu sampled reads one cookie of its own (%zu violations)\n",
			 bad_order, interleaved, reads_sampled, bad_reads);
	ksft_test_result(!orphan,
			 "every child record in either session has a sample in one of them (%zu not; A %zu and B %zu of them sampled only by the other session)\n",
			 orphan, only_other[0], only_other[1]);

	dc_rings_close(sa.rings, sa.nr_rings);
	dc_rings_close(sb.rings, sb.nr_rings);
	close(go[1]);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	dc_log_free(&sa.log);
	dc_log_free(&sb.log);
	dc_finished();
}
