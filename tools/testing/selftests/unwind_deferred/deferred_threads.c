// SPDX-License-Identifier: GPL-2.0
/*
 * Deferred user callchains of a multi-threaded process.
 *
 * A child process runs NR_THREADS worker threads.  Each runs the workload
 * (short system calls in workload_leaf) and then long reads of /dev/zero
 * (one long kernel entry each, made in read_leaf), each thread with its
 * own buffer.
 *
 * Part A: one per-task event per worker thread (pid = tid, cpu = -1),
 *   each with its own ring, opened once the threads exist.
 * Part B: inherited events (attr.inherit = 1) opened on the process
 *   before it creates its threads, which inherit them.  perf_mmap()
 *   refuses to map an inherited per-task event (cpu = -1), so, as perf
 *   record -p does, there is one inherited event per CPU (pid = the
 *   process, cpu = N), each with its own ring; inherited events write
 *   into their parent's ring.
 *
 * In both parts:
 * - every sample is of the process and one of its threads (in part A,
 *   of the ring's own thread), ends with PERF_CONTEXT_USER_DEFERRED and a
 *   cookie, and its (pid, tid, cookie) has exactly one
 *   PERF_RECORD_CALLCHAIN_DEFERRED; every record has a sample;
 * - no cookie value is seen with two threads.  The cookie is
 *   (per-CPU count << 32) | (cpu + 1), the count advanced by two, with
 *   interrupts off, for each kernel entry that asks for an unwind
 *   (kernel/unwind/deferred.c: get_cookie()), so a value is handed out
 *   once system-wide until a CPU's 32-bit count wraps;
 * - the user stack of every record taken in the workload's leaf is
 *   workload_leaf <- workload_c <- workload_b <- workload_a <- workload
 *   <- thread_main <- start_thread, and in the reads read_leaf <-
 *   thread_main <- start_thread: the whole record, where the walk ends
 *   (DC_THREAD_FRAMES);
 * - no record is lost.
 * Part B also counts the samples whose record is in another CPU's ring
 * (the thread moved to another CPU between the sample and its return to
 * user space).
 *
 * The threads do not exit: after their work they wait, and the process
 * stops itself (SIGSTOP, a group stop) before the events are disabled.
 * See deferred_task.c for why, and for the samples taken on the way into
 * that stop after the task_work ran (their record is due at the next
 * return to user space): they are counted apart.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest.h"
#include "dc_util.h"
#include "workload.h"

#define NR_THREADS	4
#define WORK_MS		300
#define NR_READS	4
#define READ_SIZE	(4 << 20)
#define PERIOD_NS	250000	/* 4 kHz */
#define RING_PAGES	256
#define MAX_CPUS	64
#define MIN_PER_THREAD	10	/* samples; TCG under load coalesces ticks */
#define TIMEOUT_S	120

static const char *const leaf_chain[] = { WORKLOAD_CHAIN, DC_THREAD_FRAMES };
static const char *const read_chain[] = { "read_leaf", DC_THREAD_FRAMES };
#define NR_LEAF_CHAIN ((int)ARRAY_SIZE(leaf_chain))
#define NR_READ_CHAIN ((int)ARRAY_SIZE(read_chain))

/* ---- the child process ---- */

static int zero_fd, tid_pipe;
static pthread_barrier_t start_bar, done_bar;

/* The long system calls, made here so their user stack starts here. */
__attribute__((noinline)) int read_leaf(char *buf)
{
	int bad = 0;

	DC_KEEP_FRAME();
	for (int i = 0; i < NR_READS; i++) {
		long ret = dc_syscall3(__NR_read, zero_fd, (long)buf, READ_SIZE);
		bad += ret != READ_SIZE;
	}
	return bad;
}

__attribute__((noinline)) void *thread_main(void *arg)
{
	pid_t tid = syscall(SYS_gettid);

	if (write(tid_pipe, &tid, sizeof(tid)) != sizeof(tid))
		_exit(5);
	pthread_barrier_wait(&start_bar);
	workload(WORK_MS);
	asm volatile("" ::: "memory");	/* not a tail call */
	if (read_leaf(arg))
		_exit(4);
	asm volatile("" ::: "memory");	/* not a tail call */
	pthread_barrier_wait(&done_bar);
	for (;;)
		pause();
	return NULL;
}

static void create_threads(void)
{
	pthread_t t;

	for (int i = 0; i < NR_THREADS; i++) {
		char *buf = mmap(NULL, READ_SIZE, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

		if (buf == MAP_FAILED || pthread_create(&t, NULL, thread_main, buf))
			_exit(6);
	}
}

/*
 * Part A creates the threads before the go (their tids are needed to
 * open the events), part B after it (they must inherit the events).
 */
static void child_main(bool threads_first, int go_fd)
{
	char c;

	zero_fd = open("/dev/zero", O_RDONLY);
	if (zero_fd < 0)
		_exit(3);
	pthread_barrier_init(&start_bar, NULL, NR_THREADS + 1);
	pthread_barrier_init(&done_bar, NULL, NR_THREADS + 1);
	if (threads_first)
		create_threads();
	if (read(go_fd, &c, 1) != 1)
		_exit(3);
	if (!threads_first)
		create_threads();
	pthread_barrier_wait(&start_bar);
	pthread_barrier_wait(&done_bar);
	raise(SIGSTOP);
	_exit(0);
}

/* ---- the profiler ---- */

struct part {
	const char *name;
	bool per_thread;	/* A: ring i is thread i's; B: ring i is CPU i's */
	pid_t pid;
	pid_t tids[NR_THREADS + 1];
	int nr_tids;
	struct dc_ring rings[MAX_CPUS];
	int nr_rings;
	struct dc_log log;
};

static void read_tids(struct part *p, int fd)
{
	for (int i = 0; i < NR_THREADS; i++)
		if (read(fd, &p->tids[p->nr_tids++], sizeof(pid_t)) != sizeof(pid_t))
			ksft_exit_fail_msg("%s: reading the thread ids: %s\n",
					   p->name, strerror(errno));
}

/* Run the child and collect every record of the part's events. */
static void run_part(struct part *p)
{
	int go[2], tp[2], cpus[MAX_CPUS], ncpus, st, err;
	struct perf_event_attr attr;
	time_t t0;
	pid_t w;

	if (pipe(go) || pipe(tp))
		ksft_exit_fail_msg("pipe: %s\n", strerror(errno));
	p->pid = fork();
	if (p->pid < 0)
		ksft_exit_fail_msg("fork: %s\n", strerror(errno));
	if (p->pid == 0) {
		close(go[1]);
		close(tp[0]);
		tid_pipe = tp[1];
		child_main(p->per_thread, go[0]);
	}
	close(go[0]);
	close(tp[1]);

	dc_attr_init(&attr, PERIOD_NS, true);
	if (p->per_thread) {
		read_tids(p, tp[0]);
		for (int i = 0; i < NR_THREADS; i++) {
			err = dc_ring_open(&p->rings[i], &attr, p->tids[i], -1,
					   RING_PAGES, i);
			if (err)
				ksft_exit_fail_msg("%s: event on tid %d: %s\n", p->name,
						   p->tids[i], strerror(-err));
		}
		p->nr_rings = NR_THREADS;
	} else {
		attr.inherit = 1;
		ncpus = dc_online_cpus(cpus, MAX_CPUS);
		if (ncpus <= 0)
			ksft_exit_fail_msg("no online CPUs\n");
		for (int i = 0; i < ncpus; i++) {
			err = dc_ring_open(&p->rings[i], &attr, p->pid, cpus[i],
					   RING_PAGES, i);
			if (err)
				ksft_exit_fail_msg("%s: inherited event on CPU %d: %s\n",
						   p->name, cpus[i], strerror(-err));
		}
		p->nr_rings = ncpus;
		p->tids[p->nr_tids++] = p->pid;
	}
	if (dc_rings_ioctl(p->rings, p->nr_rings, PERF_EVENT_IOC_ENABLE) ||
	    write(go[1], "g", 1) != 1)
		ksft_exit_fail_msg("%s: start: %s\n", p->name, strerror(errno));

	t0 = time(NULL);
	for (;;) {
		dc_rings_poll_drain(p->rings, p->nr_rings, &p->log, 20);
		w = waitpid(p->pid, &st, WUNTRACED | WNOHANG);
		if (w == p->pid && WIFSTOPPED(st))
			break;
		if (w == p->pid)
			ksft_exit_fail_msg("%s: child died (status %#x)\n", p->name, st);
		if (time(NULL) - t0 > TIMEOUT_S)
			ksft_exit_fail_msg("%s: child did not finish in %d s\n",
					   p->name, TIMEOUT_S);
	}
	dc_rings_ioctl(p->rings, p->nr_rings, PERF_EVENT_IOC_DISABLE);
	dc_rings_poll_drain(p->rings, p->nr_rings, &p->log, 0);
	if (!p->per_thread)
		read_tids(p, tp[0]);
	dc_rings_close(p->rings, p->nr_rings);
	kill(p->pid, SIGKILL);
	waitpid(p->pid, &st, 0);
	close(go[1]);
	close(tp[0]);
}

struct owner {
	uint64_t cookie;
	uint32_t tid;
};

static int owner_cmp(const void *a, const void *b)
{
	const struct owner *x = a, *y = b;

	if (x->cookie != y->cookie)
		return x->cookie < y->cookie ? -1 : 1;
	return (x->tid > y->tid) - (x->tid < y->tid);
}

/* Cookies seen (in samples or records) with more than one thread. */
static size_t shared_cookies(const struct dc_log *log)
{
	size_t n = 0, shared = 0;
	struct owner *o;

	o = calloc(log->nr_samples + log->nr_deferred + 1, sizeof(*o));
	if (!o)
		ksft_exit_fail_msg("out of memory\n");
	for (size_t i = 0; i < log->nr_samples; i++)
		if (log->samples[i].cookie)
			o[n++] = (struct owner){ log->samples[i].cookie,
						 log->samples[i].tid };
	for (size_t i = 0; i < log->nr_deferred; i++)
		o[n++] = (struct owner){ log->deferred[i].cookie,
					 log->deferred[i].tid };
	qsort(o, n, sizeof(*o), owner_cmp);
	for (size_t i = 1; i < n; i++) {
		if (o[i].cookie != o[i - 1].cookie || o[i].tid == o[i - 1].tid)
			continue;
		shared++;
		ksft_print_msg("cookie %#llx seen with tids %u and %u\n",
			       (unsigned long long)o[i].cookie, o[i - 1].tid,
			       o[i].tid);
	}
	free(o);
	return shared;
}

static int tid_index(const struct part *p, uint32_t tid)
{
	for (int i = 0; i < p->nr_tids; i++)
		if ((uint32_t)p->tids[i] == tid)
			return i;
	return -1;
}

static void check_part(struct part *p)
{
	size_t bad_owner = 0, bad_ctx = 0, missing = 0, dup = 0, stopping = 0;
	size_t matched = 0, cookies = 0, orphan = 0, bad_rec = 0, cross = 0;
	size_t leaf = 0, leaf_ok = 0, reads = 0, reads_ok = 0, frameless = 0;
	size_t per_tid[NR_THREADS + 1] = { 0 }, min_worker = SIZE_MAX;
	struct dc_log *log = &p->log;
	bool printed_bad = false;

	for (size_t i = 0; i < log->nr_samples; i++) {
		struct dc_sample *s = &log->samples[i];
		int t = tid_index(p, s->tid);
		long idx, n;

		if (s->pid != (uint32_t)p->pid || t < 0 ||
		    (p->per_thread && t != s->ring)) {
			bad_owner++;
			continue;
		}
		per_tid[t]++;
		if (!s->ends_deferred || !s->cookie || s->has_user_ctx) {
			bad_ctx++;
			continue;
		}
		idx = dc_find_deferred(log, s->pid, s->tid, s->cookie, &n);
		if (idx < 0 && dc_in_final_stop(log, s)) {
			if (!stopping++) {
				ksft_print_msg("%s: sample %zu of tid %u: cookie %#llx, in the thread's last entry on the way into the stop after its task_work ran:\n",
					       p->name, i, s->tid,
					       (unsigned long long)s->cookie);
				dc_print_merged(s, NULL);
			}
			continue;
		}
		if (idx < 0) {
			if (missing++ < 3) {
				ksft_print_msg("%s: sample %zu of tid %u: cookie %#llx has no deferred record\n",
					       p->name, i, s->tid,
					       (unsigned long long)s->cookie);
				dc_print_merged(s, NULL);
			}
			continue;
		}
		dup += n > 1;
		matched++;
		log->deferred[idx].matched++;
		cross += log->deferred[idx].ring != s->ring;
	}

	for (size_t i = 0; i < log->nr_deferred; i++) {
		struct dc_deferred *d = &log->deferred[i];
		int t = tid_index(p, d->tid);
		bool fl;
		int r;

		if (d->pid != (uint32_t)p->pid || t < 0 ||
		    (p->per_thread && t != d->ring))
			bad_owner++;
		if (d->matched) {
			cookies++;
		} else {
			orphan++;
			ksft_print_msg("%s: deferred record of tid %u cookie %#llx has no sample\n",
				       p->name, d->tid, (unsigned long long)d->cookie);
		}
		if (d->misc != PERF_RECORD_MISC_USER || !d->nr)
			bad_rec++;
		for (uint32_t j = 0; j < d->nr; j++)
			if (d->ips[j] >= DC_USER_MAX)
				bad_rec++;

		r = dc_check_leaf_record(d, "workload_leaf", leaf_chain,
					NR_LEAF_CHAIN, &fl);
		if (r >= 0) {
			leaf++;
			leaf_ok += r;
			frameless += fl;
		} else {
			r = dc_check_leaf_record(d, "read_leaf", read_chain,
						NR_READ_CHAIN, &fl);
			if (r >= 0) {
				reads++;
				reads_ok += r;
				frameless += fl;
			}
		}
		if (r == 0 && !printed_bad) {
			printed_bad = true;
			ksft_print_msg("%s: record with a wrong user stack:\n", p->name);
			dc_print_merged(&(struct dc_sample){ .pid = d->pid, .tid = d->tid,
							     .cookie = d->cookie }, d);
		}
	}

	for (int t = 0; t < p->nr_tids; t++) {
		ksft_print_msg("%s: tid %d: %zu samples\n", p->name, p->tids[t],
			       per_tid[t]);
		/* Part B's tids[0] is the main thread: it does no work. */
		if ((p->per_thread || t > 0) && per_tid[t] < min_worker)
			min_worker = per_tid[t];
	}
	ksft_print_msg("%s: threads %d, rings %d, samples %zu, deferred records %zu, matched samples %zu, matched cookies %zu, mismatches %zu (missing %zu, duplicated %zu, orphan records %zu, wrong thread %zu), in the final stop %zu\n",
		       p->name, NR_THREADS, p->nr_rings, log->nr_samples,
		       log->nr_deferred, matched, cookies,
		       missing + dup + orphan + bad_owner, missing, dup, orphan,
		       bad_owner, stopping);
	ksft_print_msg("%s: leaf records %zu (%zu exact), read records %zu (%zu exact), %zu at a frameless entry/exit; samples whose record is in another ring %zu; lost %llu, other records %llu\n",
		       p->name, leaf, leaf_ok, reads, reads_ok, frameless, cross,
		       (unsigned long long)log->lost,
		       (unsigned long long)log->other);

	ksft_test_result(!bad_owner && min_worker >= MIN_PER_THREAD,
			 "%s: %zu samples, all of pid %d and its threads%s, every worker >= %d (min %zu)\n",
			 p->name, log->nr_samples, p->pid,
			 p->per_thread ? ", each in its thread's ring" : "",
			 MIN_PER_THREAD, min_worker);
	ksft_test_result(!bad_ctx && !missing && !dup && !orphan && !bad_rec &&
			 cookies,
			 "%s: every sample ends with USER_DEFERRED + cookie (%zu not), has exactly one deferred record of its pid/tid/cookie (%zu missing, %zu duplicated, %zu in the final stop), every record (%zu) has a sample (%zu not) and is MISC_USER, user addresses (%zu bad)\n",
			 p->name, bad_ctx, missing, dup, stopping, log->nr_deferred,
			 orphan, bad_rec);
	ksft_test_result(!shared_cookies(log),
			 "%s: no cookie seen with two threads (%zu cookies)\n",
			 p->name, cookies);
	ksft_test_result(leaf && reads && leaf_ok == leaf && reads_ok == reads,
			 "%s: user stack of all %zu leaf records is %s <- %s <- %s <- %s <- %s <- thread_main <- start_thread exactly (%zu exact), of all %zu read records read_leaf <- thread_main <- start_thread exactly (%zu exact)\n",
			 p->name, leaf, leaf_chain[0], leaf_chain[1], leaf_chain[2],
			 leaf_chain[3], leaf_chain[4], leaf_ok, reads, reads_ok);
	ksft_test_result(!log->lost && !log->lost_records && !log->malformed,
			 "%s: no record lost (%llu) or malformed (%llu)\n", p->name,
			 (unsigned long long)log->lost,
			 (unsigned long long)log->malformed);
}

int main(void)
{
	static struct part a = { .name = "A per-thread events", .per_thread = true };
	static struct part b = { .name = "B inherited per-CPU events" };

	ksft_print_header();
	ksft_set_plan(10);
	if (dc_syms_load())
		ksft_exit_fail_msg("cannot read own symbol table\n");
	dc_kallsyms_load();

	run_part(&a);
	check_part(&a);
	dc_log_free(&a.log);

	run_part(&b);
	check_part(&b);
	dc_log_free(&b.log);

	dc_finished();
}
