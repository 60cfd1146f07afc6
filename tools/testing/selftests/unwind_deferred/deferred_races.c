// SPDX-License-Identifier: GPL-2.0
/*
 * Races with a deferred unwind pending: close, disable, munmap, SIGKILL,
 * exec, and CPU-wide sessions opened and closed under running tasks.
 * Each case drives its racy path many times (bounded in count and time);
 * it also runs under the debug kernels (KASAN, kmemleak, lockdep), which
 * catch what the records cannot show.  Where the outcome is defined it is
 * asserted exactly.
 *
 * 1. close: a child reads /dev/zero in a loop (one long kernel entry per
 *    read) under two per-task events: B for the whole run, A opened,
 *    enabled, and after a random 1-12 ms closed (close(fd) then munmap,
 *    or munmap then close) again and again, so that A goes away with
 *    unwinds pending at random points.  The child must finish normally
 *    (stop itself), and B, open throughout: every cookie B sampled has
 *    exactly one record of the child's tid, samples in read() have exactly
 *    zero_leaf <- zero_child <- spawn <- close_races <- main <-
 *    __libc_start_call_main; every record A got before its close is in B,
 *    identical (the callback writes each record to every defer_output
 *    event of the task).
 * 2, 3. A child writes 4 MiB into a pipe (one kernel entry); the test
 *    reads slowly until event A has sampled that write (cookie C pending:
 *    the write cannot return before the test has read nearly everything),
 *    then acts on A, reads the rest, waits until the child is back in user
 *    space (its task_work has run), and checks A's and B's records of C.
 *    The record is written by the task_work at the return to user space,
 *    through perf_iterate_sb() -> perf_iterate_ctx(), which skips events
 *    whose state is below PERF_EVENT_STATE_INACTIVE (a disabled event is
 *    PERF_EVENT_STATE_OFF), and perf_output_begin() writes nothing to an
 *    event without a ring buffer (perf_mmap_close() detaches it when the
 *    last mapping goes).  So, on both kernels (the Rust callback uses the
 *    same iterator and perf_output_begin()):
 *    2a. disabled, the task returns, then re-enabled: A gets no record of C;
 *    2b. disabled and re-enabled while the write still runs: A gets it;
 *    3a. A's ring unmapped (fd kept), the task returns, then mapped again:
 *        A's new ring has no record of C;
 *    3b. unmapped and mapped again while the write still runs: the new
 *        ring has the record.
 *    Each outcome is checked in 10 rounds (a round in which A did not
 *    sample the write is repeated, up to 3 times as many in all).
 *    B always has exactly one record of C with exactly write_leaf <-
 *    pipe_child <- spawn <- pending_races <- main <- __libc_start_call_main,
 *    and where A has it, it is identical.
 * 4. SIGKILL from the test at a random point (0-20 ms after the first
 *    sample in read()) into 24 children reading /dev/zero, one after the other: every
 *    sample with a cookie has exactly one record of its tid, read samples
 *    with the exact stack; a sample without a cookie is in the exit path.
 *    Each child's SIGKILL is traced in the child by signal/signal_deliver
 *    (sig == 9, one CPU-wide event per CPU, defer_callchain) in
 *    get_signal(), before do_group_exit() and PF_EXITING: its sample
 *    carries the cookie of the entry the child dies in (see kill_races()),
 *    and every kill must have exactly one such sample with a cookie, none
 *    lost.  Upstream C loses the record of a task's last kernel entry when
 *    its unwind is still pending at do_exit() (docs/deviations.md): such a
 *    sample (the cookie of its tid's signal_deliver sample, kernel stack
 *    in the signal or exit path, no record) is excused on C, counted and
 *    printed with that evidence; on the Rust kernel it fails, and every
 *    killed entry's record must reach the per-task event (a record the
 *    tracepoint's own request brought about, of an entry the per-task
 *    event did not sample, is counted apart).
 * 5. exec: a child execs itself 20 times in a chain under a per-task event
 *    and at once a CPU-wide event on every online CPU (with comm, so that
 *    upstream delivers the records to it): in both sessions every cookie of
 *    the child has exactly one record of its tid (the CPU-wide records
 *    searched across all rings), a sample inside execve() has the new
 *    image's _start alone (see deferred_exit), and every record of the
 *    child is in both sessions, identical.  Both sessions are enabled
 *    while the child sleeps in a pipe read: a session enabled after an
 *    entry's unwind ran never gets that entry's record (see 6).
 * 6. CPU-wide sessions: 30 times, one event per online CPU opened, run
 *    about 50 ms, and closed, half of them disabled first and half closed
 *    while enabled, while worker threads, one pinned to each CPU, read
 *    /dev/zero.  A pinned worker's samples and records go to one ring in
 *    order, so a session's rings hold every record of a worker's entry
 *    that ended before the session's last sample of that worker: every
 *    worker sample has exactly one record, except the worker's last cookie
 *    in the session (its entry was still running at the close), and the
 *    worker's first cookie in the session if its samples are in the return
 *    to user space: that entry's unwind may have run, for the previous
 *    session's request, before this session was enabled, and a request
 *    in the same entry after the callback ran answers "already done" with
 *    the entry's cookie and queues nothing (unwind_deferred_request():
 *    the work's bit stays set in unwind_mask until unwind_reset_info() at
 *    the return; the same on Rust).  Each of the two is excused only with
 *    the evidence of its record's time: a witness, one per-task dummy
 *    event per worker open through all the sessions (defer_output,
 *    CLOCK_MONOTONIC; the callback writes each record to every
 *    defer_output event it reaches, in one pass, so the witness gets
 *    every record of the worker), must hold the entry's record, written
 *    at or after the moment the session's close began (the disable, or
 *    closed enabled the last read) for the last cookie, at or before the
 *    moment its last enable returned for the first cookie, within
 *    DC_TIME_SLACK_NS (dc_edge(), dc_util.h).  That is at most one entry
 *    per worker, session and edge (a pinned worker: one event, enabled
 *    and disabled at one moment each, which one entry spans).  Both are
 *    counted and printed; without that evidence the sample fails.
 *    Read records are exactly thread_leaf <- thread_main <- start_thread.
 *
 * A case that saw nothing to check (no samples, no pending unwind at the
 * moment of the race) fails.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest.h"
#include "dc_util.h"

#define PERIOD_NS	100000		/* 10 kHz */
#define PERIOD_B_NS	130000
#define CPU_PERIOD_NS	250000		/* 4 kHz per CPU */
#define RING_PAGES	256
#define EXEC_CPU_PERIOD_NS	1000000	/* 1 kHz per CPU */
#define EXEC_RING_PAGES	1024
#define ZERO_SIZE	(512 << 10)
#define MAX_CPUS	8

#define CLOSE_ROUNDS	60
#define CLOSE_MAX_MS	6000
#define PIPE_ROUNDS	10		/* per mode, 4 modes */
#define PIPE_SZ		(256 << 10)
#define PIPE_WRITE	(4 << 20)
#define CHUNK		(64 << 10)
#define NR_KILLS	24
#define NR_EXECS	20
#define NR_SESSIONS	30
#define SESSION_MS	50

static bool is_rust;
static unsigned int seed;

struct shared {
	volatile int start, stop;
	volatile long go, done;
	int fd;			/* the child's pipe write end */
	int start_pipe[2];	/* start by a pipe, not by spinning */
	bool use_pipe;
};

/* ---- the children; each leaf makes its system call itself ---- */

__attribute__((noinline)) long zero_leaf(int fd, char *buf)
{
	DC_KEEP_FRAME();
	return dc_syscall3(__NR_read, fd, (long)buf, ZERO_SIZE);
}

__attribute__((noinline)) void zero_child(struct shared *sh)
{
	int fd = open("/dev/zero", O_RDONLY);
	char *buf = mmap(NULL, ZERO_SIZE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	if (fd < 0 || buf == MAP_FAILED)
		_exit(3);
	while (!sh->stop)
		if (zero_leaf(fd, buf) != ZERO_SIZE)
			_exit(4);
	asm volatile("" ::: "memory");
}

__attribute__((noinline)) long write_leaf(int fd, const char *buf)
{
	DC_KEEP_FRAME();
	return dc_syscall3(__NR_write, fd, (long)buf, PIPE_WRITE);
}

__attribute__((noinline)) void pipe_child(struct shared *sh)
{
	char *buf = mmap(NULL, PIPE_WRITE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	long seen = 0;

	if (buf == MAP_FAILED)
		_exit(3);
	for (;;) {
		while (sh->go == seen && !sh->stop)
			;
		if (sh->stop)
			break;
		seen = sh->go;
		if (write_leaf(sh->fd, buf) != PIPE_WRITE)
			_exit(4);
		sh->done = seen;
	}
	asm volatile("" ::: "memory");
}

__attribute__((noinline)) void exec_leaf(const char *path, char **argv)
{
	DC_KEEP_FRAME();
	dc_syscall3(__NR_execve, (long)path, (long)argv, (long)environ);
	_exit(5);
}

static void exec_next(int left)
{
	char n[16];
	char *argv[] = { "deferred_races", "--exec-chain", n, NULL };

	if (left <= 0) {
		raise(SIGSTOP);	/* end of the chain: the test reaps it */
		_exit(0);
	}
	snprintf(n, sizeof(n), "%d", left - 1);
	exec_leaf("/proc/self/exe", argv);
}

__attribute__((noinline)) void exec_child(struct shared *sh)
{
	(void)sh;
	exec_next(NR_EXECS);
}

/*
 * Fork a child that waits (spinning, no system call) for sh->start, runs
 * @fn(@sh) and stops itself.  Kept out of line: it is a frame of the
 * exact stacks checked.
 */
static __attribute__((noinline)) pid_t spawn(void (*fn)(struct shared *),
					     struct shared *sh)
{
	pid_t pid = fork();

	if (pid == 0) {
		char c;

		if (sh->use_pipe) {
			close(sh->start_pipe[1]);
			if (read(sh->start_pipe[0], &c, 1) != 1)
				_exit(3);
		}
		while (!sh->start)
			;
		fn(sh);
		asm volatile("" ::: "memory");
		raise(SIGSTOP);
		_exit(0);
	}
	return pid;
}

/* ---- helpers ---- */

/* Wait until @pid sleeps (state S in /proc/pid/stat). */
static void wait_sleeping(pid_t pid)
{
	char path[64], buf[256], *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	for (int i = 0; i < 100000; i++) {
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

		if (f)
			fclose(f);
		buf[n] = 0;
		p = strrchr(buf, ')');
		if (p && p[1] == ' ' && p[2] == 'S')
			return;
		usleep(100);
	}
	ksft_exit_fail_msg("child %d never slept\n", pid);
}

static struct shared *shared_new(void)
{
	struct shared *sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (sh == MAP_FAILED)
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
	memset(sh, 0, sizeof(*sh));
	return sh;
}

static unsigned int rnd(unsigned int n)
{
	return rand_r(&seed) % n;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void open_task_ring(struct dc_ring *r, pid_t pid, uint64_t period, int id)
{
	struct perf_event_attr attr;
	int err;

	dc_attr_init(&attr, period, true);
	err = dc_ring_open(r, &attr, pid, -1, RING_PAGES, id);
	if (err)
		ksft_exit_fail_msg("per-task event: %s\n", strerror(-err));
	if (ioctl(r->fd, PERF_EVENT_IOC_ENABLE, 0))
		ksft_exit_fail_msg("enable: %s\n", strerror(errno));
}

static int cpus[MAX_CPUS], nr_cpus;

/* @mono: sample times in CLOCK_MONOTONIC (use_clockid), else perf's clock. */
static void open_cpu_rings(struct dc_ring *rings, int id0, uint64_t period,
			   size_t pages, bool mono)
{
	struct perf_event_attr attr;

	dc_attr_init(&attr, period, true);
	attr.comm = 1;	/* a side-band event on upstream too: see deferred_cpu */
	if (mono) {
		attr.use_clockid = 1;
		attr.clockid = CLOCK_MONOTONIC;
	}
	for (int i = 0; i < nr_cpus; i++) {
		int err = dc_ring_open(&rings[i], &attr, -1, cpus[i], pages, id0 + i);

		if (err == -EACCES) {
			FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "w");

			if (f) {
				fputs("-1\n", f);
				fclose(f);
			}
			err = dc_ring_open(&rings[i], &attr, -1, cpus[i], pages, id0 + i);
		}
		if (err)
			ksft_exit_fail_msg("event on CPU %d: %s\n", cpus[i], strerror(-err));
	}
	if (dc_rings_ioctl(rings, nr_cpus, PERF_EVENT_IOC_ENABLE))
		ksft_exit_fail_msg("enable: %s\n", strerror(errno));
}

/*
 * Is @s in the return to user space (the exit-to-user loop, where the
 * unwind's task_work runs)?  On x86 that loop is inlined into
 * irqentry_exit() or do_syscall_64(); schedule() called straight from
 * irqentry_exit() is the loop's (kernel preemption is
 * preempt_schedule_irq()).
 */
static bool in_return_path(const struct dc_sample *s)
{
	static const char *const names[] = {
		"exit_to_user_mode_loop", "resume_user_mode_work", "task_work_run",
		"irqentry_exit_to_user_mode", "syscall_exit_to_user_mode", NULL
	};

	for (int i = 0; names[i]; i++)
		if (dc_kernel_stack_has(s, names[i]))
			return true;
	for (uint32_t i = 0; i + 1 < s->nr_kernel; i++)
		if (!strcmp(dc_ksym(s->kernel[i]), "schedule") &&
		    !strcmp(dc_ksym(s->kernel[i + 1]), "irqentry_exit"))
			return true;
	return false;
}

/* The cookie of @tid's first sample (by time) in @log that has one. */
static uint64_t first_cookie(const struct dc_log *log, uint32_t tid)
{
	uint64_t time = UINT64_MAX, cookie = 0;

	for (size_t i = 0; i < log->nr_samples; i++) {
		const struct dc_sample *s = &log->samples[i];

		if (s->tid == tid && s->cookie && s->time < time) {
			time = s->time;
			cookie = s->cookie;
		}
	}
	return cookie;
}

/* The cookie of @tid's last sample (by time) in @log[from..] that has one. */
static uint64_t last_cookie(const struct dc_log *log, size_t from, uint32_t tid)
{
	uint64_t time = 0, cookie = 0;

	for (size_t i = from; i < log->nr_samples; i++) {
		const struct dc_sample *s = &log->samples[i];

		if (s->tid == tid && s->cookie && s->time >= time) {
			time = s->time;
			cookie = s->cookie;
		}
	}
	return cookie;
}

static long find_rec(struct dc_log *log, size_t from, uint32_t tid,
		     uint64_t cookie, long *n)
{
	long found = -1;

	*n = 0;
	for (size_t i = from; i < log->nr_deferred; i++) {
		if (log->deferred[i].cookie == cookie && log->deferred[i].tid == tid) {
			if (found < 0)
				found = i;
			(*n)++;
		}
	}
	return found;
}

static bool same_rec(const struct dc_deferred *a, const struct dc_deferred *b)
{
	return a->nr == b->nr && a->tid == b->tid &&
	       !memcmp(a->ips, b->ips, a->nr * sizeof(a->ips[0]));
}

static void print_kstack(const char *what, const struct dc_sample *s)
{
	char buf[512];
	int len = 0;

	for (uint32_t i = 0; i < s->nr_kernel && i < 8 && len < 400; i++)
		len += snprintf(buf + len, sizeof(buf) - len, "%s%s",
				i ? " <- " : "", dc_ksym(s->kernel[i]));
	buf[len] = 0;
	ksft_print_msg("%s: tid %u ring %d time %llu cookie %#llx kernel %s\n",
		       what, s->tid, s->ring, (unsigned long long)s->time,
		       (unsigned long long)s->cookie, buf);
}

static int wait_stopped(pid_t pid, struct dc_ring *r, int nr, struct dc_log *log,
			int *st)
{
	long t0 = now_ms();

	for (;;) {
		pid_t w;

		dc_rings_poll_drain(r, nr, log, 10);
		w = waitpid(pid, st, WUNTRACED | WNOHANG);
		if (w == pid)
			return 0;
		if (now_ms() - t0 > 30000) {
			kill(pid, SIGKILL);
			waitpid(pid, st, 0);
			return -ETIMEDOUT;
		}
	}
}

/* ---- 1. close ---- */

static __attribute__((noinline)) void close_races(void)
{
	static const char *const want[] = {
		"zero_leaf", "zero_child", "spawn", "close_races", DC_MAIN_FRAMES
	};
	struct dc_log logb = { 0 }, loga = { 0 };
	size_t matched = 0, stop = 0, bad = 0, in_read = 0, stack_bad = 0;
	size_t a_recs = 0, a_in_b = 0, pending_close = 0, rounds = 0;
	struct shared *sh = shared_new();
	struct dc_ring b, a;
	long t0;
	pid_t pid;
	int st = 0, where;

	pid = spawn(zero_child, sh);
	if (pid < 0)
		ksft_exit_fail_msg("fork: %s\n", strerror(errno));
	open_task_ring(&b, pid, PERIOD_B_NS, 0);
	sh->start = 1;
	t0 = now_ms();
	for (rounds = 0; rounds < CLOSE_ROUNDS && now_ms() - t0 < CLOSE_MAX_MS; rounds++) {
		size_t from = loga.nr_samples, rfrom = loga.nr_deferred;
		long t1, wait = 1 + rnd(12);
		uint64_t c;
		long n;

		open_task_ring(&a, pid, PERIOD_NS, 1);
		t1 = now_ms();
		while (now_ms() - t1 < wait) {
			dc_ring_drain(&a, &loga);
			dc_ring_drain(&b, &logb);
			usleep(500);
		}
		dc_ring_drain(&a, &loga);
		/* Did A's last sample still wait for its record? */
		c = last_cookie(&loga, from, pid);
		if (c && (find_rec(&loga, rfrom, pid, c, &n), n == 0))
			pending_close++;
		if (rounds & 1) {
			close(a.fd);
			dc_ring_unmap(&a);
		} else {
			dc_ring_unmap(&a);
			close(a.fd);
		}
	}
	sh->stop = 1;
	if (wait_stopped(pid, &b, 1, &logb, &st))
		ksft_print_msg("close: the child did not stop\n");
	dc_ring_drain(&b, &logb);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	dc_rings_close(&b, 1);

	for (size_t i = 0; i < logb.nr_samples; i++) {
		struct dc_sample *s = &logb.samples[i];
		long idx, n;

		idx = s->cookie ? find_rec(&logb, 0, s->tid, s->cookie, &n) : -1;
		if (idx >= 0 && n == 1) {
			matched++;
			if (dc_kernel_stack_has(s, "ksys_read")) {
				in_read++;
				if (!dc_stack_is(logb.deferred[idx].ips, logb.deferred[idx].nr,
						 want, ARRAY_SIZE(want), &where) && !stack_bad++)
					dc_print_merged(s, &logb.deferred[idx]);
			}
			continue;
		}
		if (s->cookie && !n && dc_in_final_stop(&logb, s)) {
			stop++;
			continue;
		}
		if (bad++ < 3) {
			ksft_print_msg("close: sample %zu, cookie %#llx: %ld records in B\n",
				       i, (unsigned long long)s->cookie, s->cookie ? n : -1L);
			print_kstack("close: sample", s);
		}
	}
	for (size_t i = 0; i < loga.nr_deferred; i++) {
		struct dc_deferred *d = &loga.deferred[i];
		long idx, n;

		a_recs++;
		idx = find_rec(&logb, 0, d->tid, d->cookie, &n);
		if (idx >= 0 && n == 1 && same_rec(d, &logb.deferred[idx]))
			a_in_b++;
		else if (a_recs - a_in_b <= 3)
			ksft_print_msg("close: A's record with cookie %#llx (tid %u): %ld in B%s\n",
				       (unsigned long long)d->cookie, d->tid, n,
				       n == 1 ? ", different" : "");
	}
	bad += loga.malformed + logb.malformed + logb.lost;
	ksft_print_msg("close: %zu rounds in %ld ms (A closed with its last sample's record still due in %zu), B: %zu samples, %zu matched, %zu in read, %zu in the final stop, %zu violations, %zu wrong stacks; A: %zu samples, %zu records, %zu of them in B identical; lost %llu\n",
		       rounds, now_ms() - t0, pending_close, logb.nr_samples, matched, in_read, stop,
		       bad, stack_bad, loga.nr_samples, a_recs, a_in_b,
		       (unsigned long long)logb.lost);
	ksft_test_result(WIFSTOPPED(st) && in_read >= 20 && pending_close >= 1 &&
			 !bad && !stack_bad && a_recs && a_in_b == a_recs,
			 "close: %zu per-task events closed under a task in long reads (%zu with an unwind pending): the task finished, the event open throughout has every record, exact stacks, and every closed event's records\n",
			 rounds, pending_close);
	dc_log_free(&loga);
	dc_log_free(&logb);
	munmap(sh, 4096);
}

/* ---- 2, 3. disable, munmap ---- */

enum { DISABLE_RETURN, DISABLE_WITHIN, UNMAP_RETURN, UNMAP_WITHIN, NR_MODES };

static const char *const mode_name[NR_MODES] = {
	"disabled, task returned, re-enabled",
	"disabled and re-enabled within the entry",
	"ring unmapped, task returned, mapped again",
	"ring unmapped and mapped again within the entry",
};

struct pipe_round {
	int mode;
	uint64_t cookie;
};

static void read_n(int fd, char *sink, size_t n)
{
	while (n) {
		ssize_t r = read(fd, sink, n < CHUNK ? n : CHUNK);

		if (r <= 0)
			ksft_exit_fail_msg("pipe read: %s\n", strerror(errno));
		n -= r;
	}
}

static __attribute__((noinline)) void pending_races(void)
{
	static const char *const want[] = {
		"write_leaf", "pipe_child", "spawn", "pending_races", DC_MAIN_FRAMES
	};
	struct pipe_round rounds[PIPE_ROUNDS * NR_MODES];
	size_t ok[NR_MODES] = { 0 }, used[NR_MODES] = { 0 }, bad[NR_MODES] = { 0 };
	struct dc_log loga = { 0 }, logb = { 0 };
	struct shared *sh = shared_new();
	int pfd[2], st = 0, nr = 0, unusable = 0, got[NR_MODES] = { 0 };
	long t0 = now_ms();
	static char sink[CHUNK];
	struct dc_ring a, b;
	pid_t pid;

	if (pipe(pfd) || fcntl(pfd[1], F_SETPIPE_SZ, PIPE_SZ) < PIPE_SZ)
		ksft_exit_fail_msg("pipe: %s\n", strerror(errno));
	sh->fd = pfd[1];
	pid = spawn(pipe_child, sh);
	if (pid < 0)
		ksft_exit_fail_msg("fork: %s\n", strerror(errno));
	close(pfd[1]);
	open_task_ring(&a, pid, PERIOD_NS, 0);
	open_task_ring(&b, pid, PERIOD_B_NS, 1);
	sh->start = 1;

	/* Each mode until it had PIPE_ROUNDS usable rounds, at most 3 times that. */
	for (int r = 0, m = 0; nr < PIPE_ROUNDS * NR_MODES && r < 3 * PIPE_ROUNDS * NR_MODES;
	     r++, m = (m + 1) % NR_MODES) {
		int mode;

		while (got[m] == PIPE_ROUNDS)
			m = (m + 1) % NR_MODES;
		mode = m;
		size_t from = loga.nr_samples, total = 0;
		uint64_t c = 0;

		sh->go = r + 1;
		/* Read slowly until A sampled this write; it cannot end yet. */
		while (!c && total < PIPE_WRITE - 2 * PIPE_SZ) {
			ssize_t n = read(pfd[0], sink, CHUNK);

			if (n <= 0)
				ksft_exit_fail_msg("pipe read: %s\n", strerror(errno));
			total += n;
			dc_ring_drain(&a, &loga);
			for (size_t i = from; i < loga.nr_samples; i++)
				if (loga.samples[i].tid == (uint32_t)pid &&
				    loga.samples[i].cookie &&
				    dc_kernel_stack_has(&loga.samples[i], "ksys_write"))
					c = loga.samples[i].cookie;
		}
		if (c) {
			if (mode == DISABLE_RETURN || mode == DISABLE_WITHIN) {
				if (ioctl(a.fd, PERF_EVENT_IOC_DISABLE, 0))
					ksft_exit_fail_msg("disable: %s\n", strerror(errno));
				if (mode == DISABLE_WITHIN &&
				    ioctl(a.fd, PERF_EVENT_IOC_ENABLE, 0))
					ksft_exit_fail_msg("enable: %s\n", strerror(errno));
			} else {
				dc_ring_drain(&a, &loga);
				dc_ring_unmap(&a);
				if (mode == UNMAP_WITHIN &&
				    dc_ring_map(&a, a.fd, RING_PAGES, 0))
					ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
			}
		}
		read_n(pfd[0], sink, PIPE_WRITE - total);
		while (sh->done != r + 1)
			usleep(100);
		/* The child is back in user space: its task_work has run. */
		if (c && mode == DISABLE_RETURN &&
		    ioctl(a.fd, PERF_EVENT_IOC_ENABLE, 0))
			ksft_exit_fail_msg("enable: %s\n", strerror(errno));
		if (c && mode == UNMAP_RETURN &&
		    dc_ring_map(&a, a.fd, RING_PAGES, 0))
			ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
		dc_ring_drain(&a, &loga);
		dc_ring_drain(&b, &logb);
		if (c) {
			rounds[nr++] = (struct pipe_round){ mode, c };
			got[mode]++;
		}
		else
			unusable++;
	}
	sh->stop = 1;
	if (wait_stopped(pid, &b, 1, &logb, &st))
		ksft_print_msg("pending: the child did not stop\n");
	dc_ring_drain(&a, &loga);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	dc_rings_close(&a, 1);
	dc_rings_close(&b, 1);
	close(pfd[0]);

	for (int i = 0; i < nr; i++) {
		struct pipe_round *p = &rounds[i];
		bool want_a = p->mode == DISABLE_WITHIN || p->mode == UNMAP_WITHIN;
		long ia, ib, na, nb;
		int where;
		bool good;

		used[p->mode]++;
		ia = find_rec(&loga, 0, pid, p->cookie, &na);
		ib = find_rec(&logb, 0, pid, p->cookie, &nb);
		good = nb == 1 && dc_stack_is(logb.deferred[ib].ips, logb.deferred[ib].nr,
					      want, ARRAY_SIZE(want), &where) &&
		       na == want_a && (!na || same_rec(&loga.deferred[ia], &logb.deferred[ib]));
		if (good) {
			ok[p->mode]++;
			continue;
		}
		if (bad[p->mode]++ < 2) {
			ksft_print_msg("%s: cookie %#llx: %ld records in A (want %d), %ld in B\n",
				       mode_name[p->mode], (unsigned long long)p->cookie,
				       na, want_a, nb);
			if (ib >= 0)
				dc_print_merged(&(struct dc_sample){ .pid = pid, .tid = pid,
						.cookie = p->cookie }, &logb.deferred[ib]);
		}
	}
	ksft_print_msg("pending: %d rounds in %ld ms, %d without a sample of the write in A; A: %zu samples, %zu records, B: %zu samples, %zu records, malformed %llu, lost %llu\n",
		       nr + unusable, now_ms() - t0, unusable, loga.nr_samples, loga.nr_deferred,
		       logb.nr_samples, logb.nr_deferred,
		       (unsigned long long)(loga.malformed + logb.malformed),
		       (unsigned long long)(loga.lost + logb.lost));
	for (int m = 0; m < NR_MODES; m++)
		ksft_print_msg("pending: %s: %zu rounds, %zu as defined\n",
			       mode_name[m], used[m], ok[m]);
	{
		bool clean = WIFSTOPPED(st) && !loga.malformed && !logb.malformed &&
			     !loga.lost && !logb.lost;

		ksft_test_result(clean && used[DISABLE_RETURN] == PIPE_ROUNDS &&
				 ok[DISABLE_RETURN] == used[DISABLE_RETURN] &&
				 used[DISABLE_WITHIN] == PIPE_ROUNDS &&
				 ok[DISABLE_WITHIN] == used[DISABLE_WITHIN],
				 "disable: a sample's record is written to the event iff it is enabled when the task returns to user space (%zu rounds disabled until after the return: no record; %zu re-enabled within the entry: the record); the other event always has it, exact stack\n",
				 used[DISABLE_RETURN], used[DISABLE_WITHIN]);
		ksft_test_result(clean && used[UNMAP_RETURN] == PIPE_ROUNDS &&
				 ok[UNMAP_RETURN] == used[UNMAP_RETURN] &&
				 used[UNMAP_WITHIN] == PIPE_ROUNDS &&
				 ok[UNMAP_WITHIN] == used[UNMAP_WITHIN],
				 "munmap: the record goes to the ring mapped when the task returns (%zu rounds unmapped until after the return: none in the new ring; %zu mapped again within the entry: the record); the other event always has it, exact stack\n",
				 used[UNMAP_RETURN], used[UNMAP_WITHIN]);
	}
	dc_log_free(&loga);
	dc_log_free(&logb);
	munmap(sh, 4096);
}

/* ---- 4. SIGKILL ---- */

#define KILL_TP_PAGES	16	/* signal_deliver's ring, per CPU */

/*
 * The evidence for upstream's exit loss in case 4: every SIGKILL a child
 * dies of is traced in the child by signal/signal_deliver, filtered to
 * sig == 9.  The test's kill() makes complete_signal() set
 * SIGNAL_GROUP_EXIT, so get_signal() (kernel/signal.c, 7.3) takes its
 * "already marked for death" branch: trace_signal_deliver(SIGKILL, ...),
 * then do_group_exit() -> do_exit(), which sets PF_EXITING
 * (exit_signals()) only after that.  The event's sample (defer_callchain)
 * therefore carries the cookie of the entry the child dies in, its last,
 * and a sample of the case's per-task event with that cookie is of that
 * entry.
 *
 * CPU-wide, one event per CPU (dc_tp_rings_open(), as deferred_stress),
 * opened once before the first child exists and read after each child is
 * reaped, rather than per-task on each child: it is no event of the
 * child's perf context, the one do_exit() detaches in the order the C
 * bug is about (perf_event_exit_task() before the pending unwind), so
 * the evidence does not share the path it vouches for; one set of rings
 * serves every child; another task's SIGKILL on the machine is told
 * apart by its pid.  Its losses and malformed records fail the case.
 *
 * Its request is one more in the entry: the same cookie.  On the Rust
 * kernel the entry's record is then always written (at do_exit() if it
 * was still pending), also when the per-task event never sampled the
 * entry: such a record has no sample of its own, and is counted apart
 * (its tid and cookie are the tracepoint sample's).  On upstream C a
 * request the tracepoint made first is lost at exit like any other.
 */
static struct dc_tp_hits kill_hits;

/* The child @pid's signal_deliver samples: how many, the first in *@hit. */
static int kill_samples(pid_t pid, const struct dc_tp_hit **hit)
{
	int n = 0;

	*hit = NULL;
	for (size_t i = 0; i < kill_hits.nr; i++) {
		const struct dc_tp_hit *x = &kill_hits.v[i];

		if (x->pid != (uint32_t)pid || x->tid != (uint32_t)pid)
			continue;
		if (!n++)
			*hit = x;
	}
	return n;
}

static __attribute__((noinline)) void kill_races(void)
{
	static const char *const want[] = {
		"zero_leaf", "zero_child", "spawn", "kill_races", DC_MAIN_FRAMES
	};
	size_t matched = 0, excused = 0, bad = 0, exiting = 0, in_read = 0;
	size_t stack_bad = 0, samples = 0, killed = 0, evidence = 0, last_ok = 0;
	size_t traced = 0, traced_cookie = 0, kill_rec = 0, kill_rec_only = 0;
	size_t excused_entries = 0;
	struct dc_ring tp[MAX_CPUS];
	long t0 = now_ms();
	int err;

	err = dc_tp_rings_open(tp, cpus, nr_cpus, "signal", "signal_deliver", "sig == 9",
			       KILL_TP_PAGES, 0);
	if (err)
		ksft_exit_fail_msg("the SIGKILL tracepoint: %s\n", strerror(-err));
	if (dc_rings_ioctl(tp, nr_cpus, PERF_EVENT_IOC_ENABLE))
		ksft_exit_fail_msg("enable: %s\n", strerror(errno));
	for (int k = 0; k < NR_KILLS; k++) {
		struct shared *sh = shared_new();
		const struct dc_tp_hit *hit;
		struct dc_log log = { 0 };
		struct dc_ring a;
		long t1, delay = rnd(21);
		bool seen = false, t_seen = false, entry_excused = false;
		uint64_t kill_cookie = 0;
		int st = 0, where, nhit;
		pid_t pid;

		pid = spawn(zero_child, sh);
		if (pid < 0)
			ksft_exit_fail_msg("fork: %s\n", strerror(errno));
		open_task_ring(&a, pid, PERIOD_NS, 0);
		sh->start = 1;
		t1 = now_ms();
		for (;;) {
			dc_ring_drain(&a, &log);
			for (size_t i = 0; !seen && i < log.nr_samples; i++)
				seen = dc_kernel_stack_has(&log.samples[i], "ksys_read");
			if (seen && !t_seen) {
				t_seen = true;
				t1 = now_ms();
			}
			if (seen && now_ms() - t1 >= delay)
				break;
			if (!seen && now_ms() - t1 > 10000)
				break;
			usleep(200);
		}
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		killed += WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
		dc_ring_drain(&a, &log);
		dc_rings_close(&a, 1);
		/* The child is gone: its signal_deliver sample was written. */
		dc_tp_collect(tp, nr_cpus, &kill_hits);
		nhit = kill_samples(pid, &hit);
		traced += nhit == 1;
		if (nhit == 1 && hit->cookie) {
			traced_cookie++;
			kill_cookie = hit->cookie;
		} else if (bad++ < 3) {
			ksft_print_msg("SIGKILL: child %d (pid %d): %d signal_deliver samples%s\n",
				       k, pid, nhit, nhit == 1 ? ", without a cookie" : "");
		}
		samples += log.nr_samples;
		bad += log.malformed + log.lost;

		for (size_t i = 0; i < log.nr_samples; i++) {
			struct dc_sample *s = &log.samples[i];
			bool last_entry = kill_cookie && s->cookie == kill_cookie;
			const struct dc_tp_hit *x;
			long idx, n;

			if (!s->cookie) {
				if (dc_in_exit_path(s)) {
					exiting++;
					continue;
				}
				if (bad++ < 3)
					print_kstack("SIGKILL: no cookie, not exiting", s);
				continue;
			}
			idx = find_rec(&log, 0, s->tid, s->cookie, &n);
			if (n == 1) {
				matched++;
				if (last_entry && (dc_in_exit_path(s) || dc_in_signal_path(s)))
					last_ok++;
				if (dc_kernel_stack_has(s, "ksys_read")) {
					in_read++;
					if (!dc_stack_is(log.deferred[idx].ips, log.deferred[idx].nr,
							 want, ARRAY_SIZE(want), &where) && !stack_bad++)
						dc_print_merged(s, &log.deferred[idx]);
				}
				continue;
			}
			/*
			 * The documented upstream loss: the unwind of the last
			 * entry, still pending at do_exit(), runs after
			 * perf_event_exit_task() detached the events.  The
			 * entry is the one the child's SIGKILL was traced in.
			 */
			x = is_rust || n ? NULL : dc_tp_find(&kill_hits, s->pid, s->tid, s->cookie);
			if (x && (dc_in_exit_path(s) || dc_in_signal_path(s))) {
				excused++;
				excused_entries += !entry_excused;
				entry_excused = true;
				if (evidence++ < 5) {
					print_kstack("SIGKILL: excused on C (unwind pending at exit), the entry its SIGKILL was traced in",
						     s);
					ksft_print_msg("SIGKILL: its signal_deliver sample: pid %u tid %u time %llu cookie %#llx\n",
						       x->pid, x->tid, (unsigned long long)x->time,
						       (unsigned long long)x->cookie);
				}
				continue;
			}
			if (bad++ < 3) {
				ksft_print_msg("SIGKILL: sample %zu of child %d: %ld records\n",
					       i, k, n);
				print_kstack("SIGKILL: sample", s);
			}
		}
		if (kill_cookie) {
			long n;

			find_rec(&log, 0, pid, kill_cookie, &n);
			kill_rec += n == 1;
		}
		for (size_t i = 0; i < log.nr_deferred; i++) {
			struct dc_deferred *d = &log.deferred[i];
			bool has = false;

			for (size_t j = 0; j < log.nr_samples && !has; j++)
				has = log.samples[j].cookie == d->cookie &&
				      log.samples[j].tid == d->tid;
			if (!has && kill_cookie && d->cookie == kill_cookie &&
			    d->tid == (uint32_t)pid) {
				kill_rec_only++;	/* asked for by the tracepoint */
				continue;
			}
			if (!has && bad++ < 3)
				ksft_print_msg("SIGKILL: record with cookie %#llx (tid %u) has no sample\n",
					       (unsigned long long)d->cookie, d->tid);
		}
		dc_log_free(&log);
		munmap(sh, 4096);
	}
	err = dc_tp_finish(tp, nr_cpus, &kill_hits);
	if (err)
		ksft_exit_fail_msg("reading the SIGKILL tracepoint's lost count: %s\n",
				   strerror(-err));
	ksft_print_msg("SIGKILL: %d children killed (%zu by SIGKILL) in %ld ms, %zu samples, %zu matched (%zu of them in the killed entry's signal or exit path), %zu in read, %zu without a cookie in the exit path, %zu samples of %zu entries excused (%s), %zu violations, %zu wrong stacks\n",
		       NR_KILLS, killed, now_ms() - t0, samples, matched, last_ok, in_read, exiting,
		       excused, excused_entries,
		       is_rust ? "Rust: none allowed" :
				 "upstream C: record of the last entry lost at exit, the entry named by its signal_deliver sample",
		       bad, stack_bad);
	ksft_print_msg("SIGKILL: signal_deliver (sig == 9, CPU-wide): %llu samples in all, %zu of the %d children traced once, %zu with a cookie; the killed entry's record in the per-task event: %zu of %zu (%s), %zu of them without a sample there; tracepoint lost %llu in %llu PERF_RECORD_LOST, %llu records in its rings, malformed %llu\n",
		       (unsigned long long)kill_hits.samples, traced, NR_KILLS, traced_cookie,
		       kill_rec, traced_cookie,
		       is_rust ? "all required on Rust" : "upstream C loses a request pending at exit",
		       kill_rec_only, (unsigned long long)kill_hits.log.lost,
		       (unsigned long long)kill_hits.log.lost_records,
		       (unsigned long long)kill_hits.records,
		       (unsigned long long)kill_hits.log.malformed);
	ksft_test_result(killed == NR_KILLS && in_read >= NR_KILLS && !bad && !stack_bad &&
			 traced_cookie == NR_KILLS && (!is_rust || kill_rec == traced_cookie) &&
			 !kill_hits.log.lost && !kill_hits.log.lost_records &&
			 !kill_hits.log.malformed && !kill_hits.records,
			 "SIGKILL: %d children killed at random points in long reads, each SIGKILL traced with its entry's cookie (%zu): every sample has its record (%zu excused on upstream C: the traced entry's record lost at exit), exact stacks\n",
			 NR_KILLS, traced_cookie, excused);
	dc_tp_free(&kill_hits);
}

/* ---- 5. exec under a per-task and a CPU-wide session ---- */

struct check {
	size_t samples, matched, stop, in_exec, entry_only, bad;
};

static void check_exec_log(struct dc_log *log, struct dc_log *other, pid_t pid,
			   uint64_t start, struct check *c, const char *name)
{
	static const char *const execve[] = {
		"__x64_sys_execve", "do_execveat_common", "bprm_execve",
		"load_elf_binary", "begin_new_exec", NULL
	};

	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < log->nr_samples; i++) {
		struct dc_sample *s = &log->samples[i];
		bool exec = false;
		long idx, n;

		if (s->pid != (uint32_t)pid)
			continue;
		c->samples++;
		for (int j = 0; execve[j]; j++)
			exec |= dc_kernel_stack_has(s, execve[j]);
		idx = s->cookie ? find_rec(log, 0, s->tid, s->cookie, &n) : -1;
		if (idx >= 0 && n == 1) {
			struct dc_deferred *d = &log->deferred[idx];

			c->matched++;
			if (exec) {
				c->in_exec++;
				if (d->nr == 1 && d->ips[0] == start)
					c->entry_only++;
				else if (c->in_exec - c->entry_only == 1)
					dc_print_merged(s, d);
			}
			continue;
		}
		if (s->cookie && !n && dc_in_final_stop(log, s)) {
			c->stop++;
			continue;
		}
		if (c->bad++ < 3) {
			ksft_print_msg("exec, %s: sample %zu (ring %d, time %llu): %ld records\n",
				       name, i, s->ring, (unsigned long long)s->time,
				       s->cookie ? n : -1L);
			print_kstack("exec: sample", s);
			if (other) {
				long m, j = find_rec(other, 0, s->tid, s->cookie, &m);
				size_t ns = 0;

				for (size_t k = 0; k < other->nr_samples; k++)
					ns += other->samples[k].cookie == s->cookie;
				ksft_print_msg("exec: the other session has %zu samples and %ld records of that cookie (record time %llu)\n",
					       ns, m, j >= 0 ? (unsigned long long)other->deferred[j].time : 0ULL);
			}
		}
	}
	c->bad += log->malformed + log->lost;
}

static __attribute__((noinline)) void exec_races(void)
{
	struct dc_ring rings[MAX_CPUS + 1];
	struct dc_log task = { 0 }, cpu = { 0 };
	struct shared *sh = shared_new();
	long t0 = now_ms();
	struct check ct, cc;
	size_t both = 0, same = 0, cpu_recs = 0;
	uint64_t start;
	pid_t pid;
	int st = 0;

	start = dc_sym_addr("_start", NULL);
	if (!start)
		ksft_exit_fail_msg("no _start symbol\n");
	/*
	 * Both sessions are enabled while the child sleeps in a read of a
	 * pipe: an entry whose unwind already ran when a session was enabled
	 * has no record there (see session_races()), so none may be sampled
	 * by one session and not the other.
	 */
	sh->use_pipe = true;
	sh->start = 1;
	if (pipe(sh->start_pipe))
		ksft_exit_fail_msg("pipe: %s\n", strerror(errno));
	pid = spawn(exec_child, sh);
	if (pid < 0)
		ksft_exit_fail_msg("fork: %s\n", strerror(errno));
	close(sh->start_pipe[0]);
	wait_sleeping(pid);
	open_task_ring(&rings[0], pid, PERIOD_NS, 0);
	/*
	 * The CPU-wide rings see every task, the test's own draining
	 * included; on the debug kernel the chain of execs takes seconds
	 * (6-16 s measured, against 0.3-0.6 s on the test kernels) and 4 kHz
	 * rings of 1 MiB overflowed (37,536 records lost in one run), so
	 * that no record could be checked.  1 kHz into 4 MiB rings.
	 */
	open_cpu_rings(&rings[1], 1, EXEC_CPU_PERIOD_NS, EXEC_RING_PAGES, false);
	if (write(sh->start_pipe[1], "g", 1) != 1)
		ksft_exit_fail_msg("start: %s\n", strerror(errno));
	close(sh->start_pipe[1]);
	if (wait_stopped(pid, rings, 1 + nr_cpus, &cpu, &st))
		ksft_print_msg("exec: the child did not stop\n");
	/* Split: ring 0 is the per-task session. */
	dc_rings_poll_drain(rings, 1 + nr_cpus, &cpu, 0);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	dc_rings_close(rings, 1 + nr_cpus);
	for (size_t i = 0; i < cpu.nr_samples; i++)
		if (cpu.samples[i].ring == 0) {
			struct dc_sample *s = &cpu.samples[i];

			if (task.nr_samples == task.cap_samples) {
				task.cap_samples = task.cap_samples ? 2 * task.cap_samples : 1024;
				task.samples = realloc(task.samples, task.cap_samples * sizeof(*s));
			}
			task.samples[task.nr_samples++] = *s;
			s->pid = 0;	/* not the CPU-wide session's */
		}
	for (size_t i = 0; i < cpu.nr_deferred; i++)
		if (cpu.deferred[i].ring == 0) {
			struct dc_deferred *d = &cpu.deferred[i];

			if (task.nr_deferred == task.cap_deferred) {
				task.cap_deferred = task.cap_deferred ? 2 * task.cap_deferred : 1024;
				task.deferred = realloc(task.deferred, task.cap_deferred * sizeof(*d));
			}
			task.deferred[task.nr_deferred++] = *d;
			d->tid = 0;
		}
	task.lost = cpu.lost;	/* counted for both */
	check_exec_log(&task, &cpu, pid, start, &ct, "per-task");
	check_exec_log(&cpu, &task, pid, start, &cc, "CPU-wide");
	for (size_t i = 0; i < cpu.nr_deferred; i++)
		cpu_recs += cpu.deferred[i].tid == (uint32_t)pid;
	for (size_t i = 0; i < task.nr_deferred; i++) {
		long n, j = find_rec(&cpu, 0, task.deferred[i].tid, task.deferred[i].cookie, &n);

		if (j < 0)
			continue;
		both++;
		if (n == 1 && same_rec(&task.deferred[i], &cpu.deferred[j]))
			same++;
	}
	ksft_print_msg("exec: %ld ms; per-task: %zu samples, %zu matched, %zu in execve (%zu _start alone), %zu in the final stop, %zu violations; CPU-wide: %zu samples of the child, %zu matched, %zu in execve (%zu _start alone), %zu in the final stop, %zu violations; records: per-task %zu, CPU-wide %zu of the child, %zu in both sessions, %zu identical; lost %llu, malformed %llu\n",
		       now_ms() - t0, ct.samples, ct.matched, ct.in_exec, ct.entry_only, ct.stop, ct.bad,
		       cc.samples, cc.matched, cc.in_exec, cc.entry_only, cc.stop, cc.bad,
		       task.nr_deferred, cpu_recs, both, same,
		       (unsigned long long)cpu.lost, (unsigned long long)(task.malformed + cpu.malformed));
	ksft_test_result(WIFSTOPPED(st) && ct.in_exec >= 3 && cc.in_exec >= 3 &&
			 ct.entry_only == ct.in_exec && cc.entry_only == cc.in_exec &&
			 !ct.bad && !cc.bad && both && same == both &&
			 both == task.nr_deferred && both == cpu_recs,
			 "exec: %d chained execve() under a per-task and a CPU-wide session: every cookie has one record in each, samples in execve() (%zu, %zu) get the new image's _start alone, each of the child's %zu records is in both sessions, identical\n",
			 NR_EXECS, ct.in_exec, cc.in_exec, both);
	dc_log_free(&task);
	dc_log_free(&cpu);
	munmap(sh, 4096);
}

/* ---- 6. CPU-wide sessions opened and closed under running threads ---- */

struct worker {
	pthread_t thread;
	int cpu;
	volatile pid_t tid;
	volatile int *stop;
};

__attribute__((noinline)) long thread_leaf(int fd, char *buf)
{
	DC_KEEP_FRAME();
	return dc_syscall3(__NR_read, fd, (long)buf, ZERO_SIZE);
}

__attribute__((noinline)) void *thread_main(void *arg)
{
	struct worker *w = arg;
	int fd = open("/dev/zero", O_RDONLY);
	char *buf = mmap(NULL, ZERO_SIZE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	if (fd < 0 || buf == MAP_FAILED || sched_setaffinity(0, sizeof(set), &set))
		_exit(3);
	w->tid = gettid();
	while (!*w->stop)
		if (thread_leaf(fd, buf) != ZERO_SIZE)
			_exit(4);
	close(fd);
	munmap(buf, ZERO_SIZE);
	return NULL;
}

/*
 * The witness: every record of the workers, as (tid, cookie, time); the
 * sessions' orphans to judge by it once the workers are done.
 */
struct wrec {
	uint32_t tid;
	uint64_t cookie, time;
};

struct orphan6 {
	struct dc_sample s;
	int session;
	unsigned int edges;	/* 1 << DC_EDGE_CLOSE: last cookie, _OPEN: first */
	uint64_t open_done, close_start;
};

static struct wrec *wrecs;
static size_t nr_wrecs, cap_wrecs;

static void witness_drain(struct dc_ring *wit, int n, struct dc_log *tmp)
{
	for (int i = 0; i < n; i++)
		dc_ring_drain(&wit[i], tmp);
	for (size_t i = 0; i < tmp->nr_deferred; i++) {
		if (nr_wrecs == cap_wrecs) {
			cap_wrecs = cap_wrecs ? 2 * cap_wrecs : 4096;
			wrecs = realloc(wrecs, cap_wrecs * sizeof(*wrecs));
			if (!wrecs)
				ksft_exit_fail_msg("out of memory\n");
		}
		wrecs[nr_wrecs++] = (struct wrec){ tmp->deferred[i].tid,
						   tmp->deferred[i].cookie,
						   tmp->deferred[i].time };
	}
	/* Keep the counts (lost, malformed); drop the records themselves. */
	tmp->nr_deferred = tmp->nr_samples = 0;
}

/* The witness's record of (@tid, @cookie): how many, the time of one. */
static size_t witness_find(uint32_t tid, uint64_t cookie, uint64_t *time)
{
	size_t n = 0;

	for (size_t i = 0; i < nr_wrecs; i++) {
		if (wrecs[i].tid == tid && wrecs[i].cookie == cookie) {
			*time = wrecs[i].time;
			n++;
		}
	}
	return n;
}

static __attribute__((noinline)) void session_races(void)
{
	static const char *const want[] = { "thread_leaf", DC_THREAD_FRAMES };
	size_t matched = 0, excused = 0, bad = 0, in_read = 0, stack_bad = 0;
	size_t empty = 0, samples = 0, excused_mode[2] = { 0 }, early = 0;
	size_t nr_orphans = 0, cap_orphans = 0, no_evidence = 0;
	struct orphan6 *orphans = NULL;
	struct dc_ring wit[MAX_CPUS];
	struct dc_log wlog = { 0 };
	struct worker w[MAX_CPUS];
	volatile int stop = 0;
	long t0 = now_ms();

	for (int i = 0; i < nr_cpus; i++) {
		w[i] = (struct worker){ .cpu = cpus[i], .stop = &stop };
		if (pthread_create(&w[i].thread, NULL, thread_main, &w[i]))
			ksft_exit_fail_msg("pthread_create\n");
	}
	for (int i = 0; i < nr_cpus; i++)
		while (!w[i].tid)
			usleep(100);
	for (int i = 0; i < nr_cpus; i++) {
		struct perf_event_attr attr;
		int err;

		/* A dummy event: it never samples, it only gets the records. */
		dc_attr_init(&attr, CPU_PERIOD_NS, true);
		attr.config = PERF_COUNT_SW_DUMMY;
		attr.use_clockid = 1;
		attr.clockid = CLOCK_MONOTONIC;
		err = dc_ring_open(&wit[i], &attr, w[i].tid, -1, RING_PAGES, 100 + i);
		if (err || ioctl(wit[i].fd, PERF_EVENT_IOC_ENABLE, 0))
			ksft_exit_fail_msg("witness event on tid %d: %s\n", w[i].tid,
					   strerror(err ? -err : errno));
	}

	for (int k = 0; k < NR_SESSIONS; k++) {
		struct dc_ring rings[MAX_CPUS];
		struct dc_log log = { 0 };
		uint64_t open_done, close_start;
		size_t seen = 0;
		long t1;
		int where;

		/* CLOCK_MONOTONIC, as the witness and the moments below. */
		open_cpu_rings(rings, 0, CPU_PERIOD_NS, RING_PAGES, true);
		open_done = mono_ns();
		t1 = now_ms();
		while (now_ms() - t1 < SESSION_MS) {
			dc_rings_poll_drain(rings, nr_cpus, &log, 5);
			witness_drain(wit, nr_cpus, &wlog);
		}
		/* Disabled first: from the disable; closed enabled: the last read. */
		close_start = mono_ns();
		if (!(k & 1)) {
			dc_rings_ioctl(rings, nr_cpus, PERF_EVENT_IOC_DISABLE);
			dc_rings_poll_drain(rings, nr_cpus, &log, 0);
			dc_rings_close(rings, nr_cpus);
		} else {
			/* Closed while enabled, the fd first in every other one. */
			dc_rings_poll_drain(rings, nr_cpus, &log, 0);
			for (int i = 0; i < nr_cpus; i++) {
				if (k & 2) {
					close(rings[i].fd);
					dc_ring_unmap(&rings[i]);
				} else {
					dc_ring_unmap(&rings[i]);
					close(rings[i].fd);
				}
			}
		}
		bad += log.malformed + log.lost;
		for (size_t i = 0; i < log.nr_samples; i++) {
			struct dc_sample *s = &log.samples[i];
			bool worker = false;
			unsigned int edges;
			long idx, n;

			for (int j = 0; j < nr_cpus; j++)
				worker |= s->tid == (uint32_t)w[j].tid;
			if (!worker)
				continue;
			seen++;
			idx = s->cookie ? find_rec(&log, 0, s->tid, s->cookie, &n) : -1;
			if (idx >= 0 && n == 1) {
				matched++;
				if (dc_kernel_stack_has(s, "ksys_read")) {
					in_read++;
					if (!dc_stack_is(log.deferred[idx].ips, log.deferred[idx].nr,
							 want, ARRAY_SIZE(want), &where) && !stack_bad++)
						dc_print_merged(s, &log.deferred[idx]);
				}
				continue;
			}
			/*
			 * The entry still running at the close (the worker's
			 * last cookie), or one whose unwind ran (for an
			 * earlier session's request) before this session was
			 * enabled, the sample in what was left of its return
			 * to user space (its first cookie): the request
			 * answers "already done" with the entry's cookie, and
			 * the record was written before the session existed.
			 * Judged at the end by the witness's record.
			 */
			edges = 0;
			if (s->cookie && !n && s->cookie == last_cookie(&log, 0, s->tid))
				edges |= 1 << DC_EDGE_CLOSE;
			if (s->cookie && !n && s->cookie == first_cookie(&log, s->tid) &&
			    in_return_path(s))
				edges |= 1 << DC_EDGE_OPEN;
			if (edges) {
				if (nr_orphans == cap_orphans) {
					cap_orphans = cap_orphans ? 2 * cap_orphans : 256;
					orphans = realloc(orphans, cap_orphans * sizeof(*orphans));
					if (!orphans)
						ksft_exit_fail_msg("out of memory\n");
				}
				orphans[nr_orphans++] = (struct orphan6){ *s, k, edges,
									  open_done, close_start };
				continue;
			}
			if (bad++ < 3) {
				ksft_print_msg("session %d: sample %zu (tid %u, ring %d): %ld records\n",
					       k, i, s->tid, s->ring, s->cookie ? n : -1L);
				print_kstack("session: sample", s);
			}
		}
		samples += seen;
		empty += !seen;
		dc_log_free(&log);
	}
	stop = 1;
	for (int i = 0; i < nr_cpus; i++)
		pthread_join(w[i].thread, NULL);
	/* Every worker has returned from its last read: its records are out. */
	witness_drain(wit, nr_cpus, &wlog);
	dc_rings_close(wit, nr_cpus);
	for (size_t i = 0; i < nr_orphans; i++) {
		struct orphan6 *o = &orphans[i];
		uint64_t t = 0;
		size_t n = witness_find(o->s.tid, o->s.cookie, &t);
		int edge = n == 1 ? dc_edge(t, o->open_done, o->close_start) : DC_EDGE_NONE;

		if (edge != DC_EDGE_NONE && (o->edges & (1 << edge))) {
			if (edge == DC_EDGE_CLOSE) {
				excused++;
				excused_mode[o->session & 1]++;
			} else {
				early++;
				if (early <= 3)
					print_kstack("session: unwind done before the session opened", &o->s);
			}
			continue;
		}
		no_evidence++;
		if (no_evidence <= 5) {
			ksft_print_msg("session %d: sample (tid %u, ring %d, time %llu) of the worker's %s cookie %#llx without its record; the witness has %zu record(s) of it%s%llu; the session was open on every CPU from %llu to %llu\n",
				       o->session, o->s.tid, o->s.ring,
				       (unsigned long long)o->s.time,
				       o->edges == (1 << DC_EDGE_CLOSE) ? "last" :
				       o->edges == (1 << DC_EDGE_OPEN) ? "first" : "first and last",
				       (unsigned long long)o->s.cookie, n,
				       n ? ", written at " : "", n ? (unsigned long long)t : 0ULL,
				       (unsigned long long)o->open_done,
				       (unsigned long long)o->close_start);
			print_kstack("session: sample without evidence", &o->s);
		}
	}
	ksft_print_msg("sessions: %d CPU-wide sessions over %d pinned workers in %ld ms: %zu worker samples, %zu matched, %zu in read, %zu of an entry still running at the close (%zu disabled first, %zu closed enabled), %zu of an entry whose unwind ran before the session opened (both by their record's time in the witness), %zu of the worker's last or first cookie without that evidence, %zu sessions without a worker sample, %zu violations, %zu wrong stacks; witness: %zu records, %llu lost, %llu malformed\n",
		       NR_SESSIONS, nr_cpus, now_ms() - t0, samples, matched, in_read,
		       excused, excused_mode[0], excused_mode[1], early, no_evidence, empty,
		       bad, stack_bad, nr_wrecs, (unsigned long long)wlog.lost,
		       (unsigned long long)wlog.malformed);
	ksft_test_result(!empty && in_read >= NR_SESSIONS && !bad && !stack_bad &&
			 !no_evidence && !wlog.lost && !wlog.malformed,
			 "sessions: %d CPU-wide sessions opened and closed under threads in system calls: every worker sample has its record in its session except the entry still running at the close (%zu) or unwound before the open (%zu), each with its record's time in the witness (%zu without), exact stacks\n",
			 NR_SESSIONS, excused, early, no_evidence);
	free(orphans);
	free(wrecs);
	wrecs = NULL;
	nr_wrecs = cap_wrecs = 0;
	dc_log_free(&wlog);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--exec-chain"))
		exec_next(atoi(argv[2]));

	ksft_print_header();
	ksft_set_plan(6);
	if (dc_syms_load())
		ksft_exit_fail_msg("cannot read own symbol table\n");
	dc_kallsyms_load();
	is_rust = dc_rust_kernel();
	nr_cpus = dc_online_cpus(cpus, MAX_CPUS);
	if (nr_cpus < 1)
		ksft_exit_fail_msg("no online CPUs\n");
	seed = getenv("RACES_SEED") ? atoi(getenv("RACES_SEED")) : (unsigned int)time(NULL);
	ksft_print_msg("%s kernel, %d CPUs, seed %u (RACES_SEED)\n",
		       is_rust ? "Rust" : "upstream C", nr_cpus, seed);
	close_races();
	pending_races();
	kill_races();
	exec_races();
	session_races();
	dc_finished();
}
