// SPDX-License-Identifier: GPL-2.0
/*
 * A multithreaded exec with the siblings' deferred unwinds pending.
 *
 * A child process execs itself up to NR_ROUNDS times in a chain (fewer,
 * at least MIN_ROUNDS, where a round takes long: RUN_BUDGET_NS); every
 * image (a "round") has NR_SLOTS threads: two writers, each in one
 * writev() to its own pipe (PIPE_SZ, blocked once it is full), a reader
 * in one readv() of 2 GiB of /dev/zero (kernel work until killed), a
 * spinner in a user-space loop, and the exec'ing thread.  In even rounds
 * the exec'ing thread is the leader (slot 0), in odd rounds it is a
 * created thread and the leader is one of the writers, so de_thread()
 * also kills the leader and the exec'ing thread takes over its pid
 * (exchange_tids()).  The harness samples the child with inherited
 * per-CPU cpu-clock events (defer_callchain, defer_output, as perf record
 * does) and lets a round exec only once it has seen, in its ring, a
 * sample with a cookie of each writer and the reader inside that call:
 * the call is its last kernel entry, so its deferred unwind is queued,
 * and has not run, when the exec kills the siblings.
 *
 * What the kernel does (kernel/exit.c, kernel/signal.c, fs/exec.c,
 * kernel/unwind/deferred.c; the Rust kernel the same):
 * - de_thread() sends SIGKILL to every sibling (zap_other_threads()) and
 *   waits until they are gone.  A writer wakes from its wait in
 *   anon_pipe_write(), its write() returns and the exit-to-user loop
 *   calls get_signal(), which runs the pending task_work first
 *   (task_work_run()): the unwind, with the task's perf context still
 *   attached, so the PERF_RECORD_CALLCHAIN_DEFERRED of the write's
 *   cookie is written, with the writer's tid and the user stack of the
 *   write(), after the exec began and before the new image runs; then
 *   do_group_exit().  The same for the reader killed inside a read, and
 *   for any sibling whose request was queued when the kill came.
 * - A request made after that task_work ran but before the sibling's
 *   PF_EXITING (a sample in get_signal() or do_group_exit() of an entry
 *   not sampled before) is pending at do_exit().  The Rust kernel runs it
 *   before perf_event_exit_task(): the record is written.  Upstream 7.3
 *   detaches the task's perf context first and loses it (the upstream
 *   exit loss, docs/deviations.md): on the C kernel such an entry is
 *   excused only with its evidence (below), printed and counted.
 * - Samples taken after PF_EXITING have no cookie (the request is
 *   refused); they must be in the exit path.
 * - Every death is traced in the dying task, before PF_EXITING, by one
 *   CPU-wide tracepoint event per CPU (dc_tp_rings_open(); defer_callchain,
 *   so its sample carries the cookie of the entry the task dies in, its
 *   last).  A sibling dies of the exec's SIGKILL: de_thread() sets
 *   group_exec_task and zap_other_threads() queues SIGKILL, so the
 *   sibling's get_signal() takes its "already marked for death" branch,
 *   trace_signal_deliver(SIGKILL, ...), then do_group_exit() -> do_exit()
 *   (signal/signal_deliver, filtered to sig == 9).  The last image, one
 *   thread, calls exit_group() (raw_syscalls/sys_enter, filtered to
 *   id == __NR_exit_group), traced at the system call's entry, before
 *   do_group_exit().  An entry without a record is excused on C only if
 *   a sample of one of these (pid, tid and cookie) names it, every
 *   sample of it is in the signal or exit path (for exit_group(): or in
 *   that system call before do_group_exit(), where the tracepoint itself
 *   runs, see in_death_path()) and its tid has had no more such entries
 *   than deaths; on Rust nothing is.
 * - The exec'ing thread's own request from inside execve() is handled at
 *   its first return to user space, in the new image: one record, the
 *   new image's _start alone (as deferred_exit's exec chain), and with the
 *   new tid, the pid, even for a sample taken before de_thread() gave the
 *   exec'ing thread the leader's pid (its old tid is on that sample).
 *
 * Asserted, exactly: every round ran with its writers and reader sampled
 * in their last call before the exec (3 pending entries a round); each
 * such entry has exactly one record, of its tid, written between the
 * harness letting the round exec and the new image's main(), with the
 * whole stack of the call; every other sample's cookie has exactly one
 * record of its task (the exec'ing thread's: the pid) but the C kernel's
 * excused exit losses; no record without a sample (but one of a traced
 * death's entry, which the tracepoint's own request may bring about:
 * counted apart), lost or malformed, no kernel address (a non-user one on
 * C only: upstream's); exact stacks for samples in writev(), readv(), the
 * exec'ing thread's waits, the spinner's loop and execve().  The last
 * image exits (exit_group()).  Every death is traced exactly once, with a
 * cookie, in its window (a sibling's SIGKILL after the harness let the
 * round exec and before the new image's main(), the exit_group() after
 * the last image's main()), and nothing else of the child's pid; a
 * writer's or the reader's SIGKILL in the entry it was pending in (the
 * same cookie); on Rust every death's entry has exactly one record of its
 * tid; the tracepoints lose nothing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest.h"
#include "dc_util.h"

#define NR_ROUNDS	20
/*
 * No round starts after RUN_BUDGET_NS (the debug kernels take a second or
 * more a round): the next image ends the chain, which must have had
 * MIN_ROUNDS rounds.
 */
#define MIN_ROUNDS	6
#define RUN_BUDGET_NS	(14 * 1000000000ULL)
#define NR_SLOTS	5
#define PERIOD_NS	250000		/* 4 kHz */
#define PIPE_SZ		(4 << 20)
#define WRITEV_CHUNK	(64 << 10)
#define WRITEV_CHUNKS	1024		/* 64 MiB, far more than the pipe holds */
/* What the harness may drain from a writer's pipe (see drain_writer()). */
#define DRAIN_MAX	(16 << 20)
#define READV_CHUNK	(2 << 20)
#define READV_CHUNKS	1024
#define RING_PAGES	512
#define TP_PAGES	16	/* each death tracepoint's ring, per CPU */
#define MAX_CPUS	64
#define ROUND_TIMEOUT_NS	(4 * 1000000000ULL)
#define RUN_TIMEOUT_NS		(120 * 1000000000ULL)
/* Lowest kernel address on x86_64. */
#define DC_KERNEL_MIN	0xffff800000000000ULL

enum role { ROLE_EXEC = 1, ROLE_WRITER, ROLE_READER, ROLE_SPINNER };

static const char *const role_name[] = {
	[ROLE_EXEC] = "exec", [ROLE_WRITER] = "writer",
	[ROLE_READER] = "reader", [ROLE_SPINNER] = "spinner",
};

/* Slot @slot's role in round @r: slot 0 is the leader. */
static int slot_role(int r, int slot)
{
	static const int even[NR_SLOTS] = {
		ROLE_EXEC, ROLE_WRITER, ROLE_WRITER, ROLE_READER, ROLE_SPINNER
	};
	static const int odd[NR_SLOTS] = {
		ROLE_WRITER, ROLE_WRITER, ROLE_EXEC, ROLE_READER, ROLE_SPINNER
	};

	return r % 2 ? odd[slot] : even[slot];
}

struct round {
	int tid[NR_SLOTS];
	int rfd[NR_SLOTS];	/* a writer's pipe's read end, 0: not yet */
	int ready;		/* slots that wrote their tid */
	int go;			/* the harness: exec now */
	uint64_t start_ns;	/* the image's main(), CLOCK_MONOTONIC */
};

/* Shared with the child through a memfd it keeps across its execs. */
struct shm {
	int start;		/* the harness: events enabled */
	int stop;		/* the harness: the next image is the last */
	int cur;		/* the round of the running image, -1 before */
	int fail;		/* the child's failure, for the harness */
	struct round r[NR_ROUNDS + 1];
};

static struct shm *shm;
static int shm_fd;
static int round_nr;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* ---- the child; each leaf makes its system call itself ---- */

static void child_fail(int line)
{
	__atomic_store_n(&shm->fail, line, __ATOMIC_RELEASE);
	_exit(3);
}

__attribute__((noinline)) void exec_leaf(const char *path, char **argv)
{
	DC_KEEP_FRAME();
	dc_syscall3(__NR_execve, (long)path, (long)argv, (long)environ);
	asm volatile("" ::: "memory");
}

static void exec_next(int round)
{
	char r[16], fd[16];
	char *argv[] = { "deferred_mtexec", "--round", r, fd, NULL };

	snprintf(r, sizeof(r), "%d", round);
	snprintf(fd, sizeof(fd), "%d", shm_fd);
	exec_leaf("/proc/self/exe", argv);
	child_fail(__LINE__);
}

__attribute__((noinline)) void wait_leaf(int *flag)
{
	struct timespec ts = { 0, 1000000 };

	DC_KEEP_FRAME();
	while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE))
		dc_syscall3(__NR_nanosleep, (long)&ts, 0, 0);
	asm volatile("" ::: "memory");
}

__attribute__((noinline)) void exec_role(int r)
{
	wait_leaf(&shm->r[r].go);
	exec_next(r + 1);
}

__attribute__((noinline)) void writev_leaf(int fd, const struct iovec *iov, int n)
{
	DC_KEEP_FRAME();
	dc_syscall3(__NR_writev, fd, (long)iov, n);
	asm volatile("" ::: "memory");
}

/*
 * One writev() of far more than the pipe holds (WRITEV_CHUNKS times the
 * same WRITEV_CHUNK bytes): it copies PIPE_SZ bytes and waits for a reader,
 * until the exec kills it.  The harness reads from the pipe (its read end
 * taken with pidfd_getfd()) only until it saw the writer sampled in the
 * writev, which then waits.
 */
__attribute__((noinline)) void writer_role(int slot)
{
	static __thread struct iovec iov[WRITEV_CHUNKS];
	int p[2];
	char *buf;

	if (pipe2(p, O_CLOEXEC) || fcntl(p[1], F_SETPIPE_SZ, PIPE_SZ) < PIPE_SZ)
		child_fail(__LINE__);
	buf = mmap(NULL, WRITEV_CHUNK, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (buf == MAP_FAILED)
		child_fail(__LINE__);
	for (int i = 0; i < WRITEV_CHUNKS; i++)
		iov[i] = (struct iovec){ buf, WRITEV_CHUNK };
	__atomic_store_n(&shm->r[round_nr].rfd[slot], p[0], __ATOMIC_RELEASE);
	writev_leaf(p[1], iov, WRITEV_CHUNKS);
	child_fail(__LINE__);	/* the writev returned */
}

__attribute__((noinline)) void readv_leaf(int fd, const struct iovec *iov, int n)
{
	DC_KEEP_FRAME();
	dc_syscall3(__NR_readv, fd, (long)iov, n);
	asm volatile("" ::: "memory");
}

/*
 * One readv() of /dev/zero, READV_CHUNKS times the same READV_CHUNK
 * bytes (MAX_RW_COUNT, 2 GiB less a page, in all): seconds of kernel
 * work, far more than a round takes, so the exec kills it inside
 * (read_iter_zero() stops at a pending signal).
 */
__attribute__((noinline)) void reader_role(void)
{
	static struct iovec iov[READV_CHUNKS];
	int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	char *buf = mmap(NULL, READV_CHUNK, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	if (fd < 0 || buf == MAP_FAILED)
		child_fail(__LINE__);
	for (int i = 0; i < READV_CHUNKS; i++)
		iov[i] = (struct iovec){ buf, READV_CHUNK };
	readv_leaf(fd, iov, READV_CHUNKS);
	child_fail(__LINE__);	/* the readv returned */
}

__attribute__((noinline)) void spin_leaf(void)
{
	DC_KEEP_FRAME();
	for (volatile unsigned long i = 0; ; i++)
		;
}

__attribute__((noinline)) void spinner_role(void)
{
	spin_leaf();
}

static void publish(int slot)
{
	struct round *rd = &shm->r[round_nr];

	rd->tid[slot] = gettid();
	__atomic_add_fetch(&rd->ready, 1, __ATOMIC_RELEASE);
}

static __attribute__((noinline)) void run_role(int slot)
{
	switch (slot_role(round_nr, slot)) {
	case ROLE_EXEC:
		exec_role(round_nr);
		break;
	case ROLE_WRITER:
		writer_role(slot);
		break;
	case ROLE_READER:
		reader_role();
		break;
	case ROLE_SPINNER:
		spinner_role();
		break;
	}
	child_fail(__LINE__);
}

__attribute__((noinline)) void *thread_main(void *arg)
{
	int slot = (int)(long)arg;

	publish(slot);
	run_role(slot);
	return NULL;
}

/* The image of round @r: its threads, then the exec (or a writer). */
static __attribute__((noinline)) void child_round(int r)
{
	pthread_t t;

	shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd, 0);
	if (shm == MAP_FAILED)
		_exit(3);
	round_nr = r;
	shm->r[r].start_ns = now_ns();
	__atomic_store_n(&shm->cur, r, __ATOMIC_RELEASE);
	if (r == NR_ROUNDS || __atomic_load_n(&shm->stop, __ATOMIC_ACQUIRE))
		_exit(0);	/* the end of the chain */
	publish(0);
	for (long slot = 1; slot < NR_SLOTS; slot++)
		if (pthread_create(&t, NULL, thread_main, (void *)slot))
			child_fail(__LINE__);
	run_role(0);
}

/* ---- the harness ---- */

struct tid_info {
	int round, slot, role;	/* the last round the tid was in */
	int deaths;		/* how many tasks with this tid were killed */
};

static pid_t child;
static uint64_t go_ns[NR_ROUNDS];
static uint64_t pend[NR_ROUNDS][NR_SLOTS];	/* the siblings' pending cookies */
static bool timed_out[NR_ROUNDS];
static int drains;	/* writers the harness had to drain */
static uint64_t start_addr, start_size;

/*
 * The deaths' tracepoints (see the top): the siblings' SIGKILL, the last
 * image's exit_group().  Open from before the fork until the child is
 * reaped, CPU-wide: no event of the child's perf context, the one
 * do_exit() detaches in the order the C bug is about, so the evidence
 * does not share the path it vouches for; another task's hit is told
 * apart by its pid.  A hit that is one of the child's deaths gets its
 * mark (check_deaths()); only those are evidence.
 */
enum { TP_KILL, TP_EXIT, NR_TP };
static const char *const tp_what[NR_TP] = {
	[TP_KILL] = "SIGKILL (signal_deliver)",
	[TP_EXIT] = "exit_group() (sys_enter)",
};

static struct dc_tp_hits tp_hits[NR_TP];

static void open_death_rings(struct dc_ring tp[NR_TP][MAX_CPUS], const int *cpus,
			     int ncpus)
{
	char filter[32];
	int err;

	snprintf(filter, sizeof(filter), "id == %d", __NR_exit_group);
	err = dc_tp_rings_open(tp[TP_KILL], cpus, ncpus, "signal", "signal_deliver",
			       "sig == 9", TP_PAGES, ncpus);
	if (err)
		ksft_exit_fail_msg("the SIGKILL tracepoint: %s\n", strerror(-err));
	err = dc_tp_rings_open(tp[TP_EXIT], cpus, ncpus, "raw_syscalls", "sys_enter",
			       filter, TP_PAGES, 2 * ncpus);
	if (err)
		ksft_exit_fail_msg("the exit_group() tracepoint: %s\n", strerror(-err));
	for (int k = 0; k < NR_TP; k++)
		if (dc_rings_ioctl(tp[k], ncpus, PERF_EVENT_IOC_ENABLE))
			ksft_exit_fail_msg("enable: %s\n", strerror(errno));
}

static const char *const execve_fns[] = {
	"__x64_sys_execve", "do_execveat_common", "bprm_execve",
	"load_elf_binary", "begin_new_exec", NULL
};

static bool has_any(const struct dc_sample *s, const char *const *names)
{
	for (; *names; names++)
		if (dc_kernel_stack_has(s, *names))
			return true;
	return false;
}

static bool in_nanosleep(const struct dc_sample *s)
{
	return dc_kernel_stack_has(s, "__x64_sys_nanosleep") ||
	       dc_kernel_stack_has(s, "hrtimer_nanosleep");
}

static bool c_kernel(void)
{
	return !strcmp(dc_variant(), "c");
}

/*
 * The system call a sibling of role @role makes last, and waits or works
 * in until the exec kills it: a writer's write(), the reader's readv().
 */
static const char *last_call(int role)
{
	return role == ROLE_WRITER ? "do_writev" : role == ROLE_READER ? "do_readv" : NULL;
}

/*
 * Round @r may exec once each writer and the reader of it was sampled
 * inside its last system call (a sample of its tid with a cookie, that
 * call on the kernel stack): the call does not return before the exec
 * kills it, so the entry's unwind is queued and has not run.  Their
 * cookies go to pend[r].
 */
static bool siblings_pending(const struct dc_log *log, int r, size_t *from)
{
	const struct round *rd = &shm->r[r];
	bool all = true;

	for (size_t i = *from; i < log->nr_samples; i++) {
		const struct dc_sample *s = &log->samples[i];

		for (int k = 0; k < NR_SLOTS && s->cookie; k++) {
			const char *call = last_call(slot_role(r, k));

			if (call && !pend[r][k] && s->tid == (uint32_t)rd->tid[k] &&
			    dc_kernel_stack_has(s, call))
				pend[r][k] = s->cookie;
		}
	}
	*from = log->nr_samples;
	for (int k = 0; k < NR_SLOTS; k++)
		all &= !last_call(slot_role(r, k)) || pend[r][k];
	return all;
}

/*
 * Keep a writer of round @r that was not yet seen sampled in its writev()
 * copying: read up to 64 KiB of its pipe through our copy of its read end
 * (*@hfd, taken with pidfd_getfd()), at most DRAIN_MAX in all (*@drained),
 * far less than the writev() writes.  Under TCG a 4 MiB copy was seen to
 * take too few of the event's periods to be sampled once in a while.
 */
static void drain_writer(int pidfd, int r, int k, int *hfd, size_t *drained)
{
	static char buf[64 << 10];
	int rfd = __atomic_load_n(&shm->r[r].rfd[k], __ATOMIC_ACQUIRE);
	ssize_t n;

	if (!rfd || *drained >= DRAIN_MAX)
		return;
	if (*hfd < 0) {
		*hfd = syscall(__NR_pidfd_getfd, pidfd, rfd, 0);
		if (*hfd < 0 || fcntl(*hfd, F_SETFL, O_NONBLOCK))
			ksft_exit_fail_msg("pidfd_getfd: %s\n", strerror(errno));
	}
	n = read(*hfd, buf, sizeof(buf));
	if (n > 0)
		*drained += n;
}

/* At a round's timeout: where each thread of it is (for the log). */
static void print_threads(int r)
{
	static const char *const files[] = { "stat", "stack" };
	char path[64], buf[2048];

	for (int k = 0; k < NR_SLOTS; k++) {
		for (int f = 0; f < 2; f++) {
			ssize_t n;
			int fd;

			snprintf(path, sizeof(path), "/proc/%d/task/%d/%s", child,
				 shm->r[r].tid[k], files[f]);
			fd = open(path, O_RDONLY);
			n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
			if (fd >= 0)
				close(fd);
			buf[n > 0 ? n : 0] = 0;
			ksft_print_msg("round %d slot %d (%s) %s: %s\n", r, k,
				       role_name[slot_role(r, k)], files[f], buf);
		}
	}
}

/*
 * Fork the child, sample it until the last image exited, collecting
 * every record into @log.  Returns the child's wait status.
 */
static int run(struct dc_log *log)
{
	struct dc_ring ring[MAX_CPUS], tp[NR_TP][MAX_CPUS];
	int cpus[MAX_CPUS], ncpus, st = 0, err;
	struct perf_event_attr attr;
	uint64_t t0 = now_ns(), ready_ns = 0;
	size_t scan_from = 0, drained[NR_SLOTS];
	int waiting = -1, pidfd, hfd[NR_SLOTS];

	ncpus = dc_online_cpus(cpus, MAX_CPUS);
	if (ncpus < 1)
		ksft_exit_fail_msg("no online CPUs\n");
	open_death_rings(tp, cpus, ncpus);
	shm_fd = memfd_create("deferred_mtexec", 0);
	if (shm_fd < 0 || ftruncate(shm_fd, sizeof(*shm)))
		ksft_exit_fail_msg("memfd: %s\n", strerror(errno));
	shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd, 0);
	if (shm == MAP_FAILED)
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
	shm->cur = -1;
	child = fork();
	if (child < 0)
		ksft_exit_fail_msg("fork: %s\n", strerror(errno));
	if (child == 0) {
		while (!__atomic_load_n(&shm->start, __ATOMIC_ACQUIRE))
			;
		exec_next(0);
	}

	dc_attr_init(&attr, PERIOD_NS, true);
	attr.read_format = PERF_FORMAT_LOST;
	attr.inherit = 1;
	attr.use_clockid = 1;
	attr.clockid = CLOCK_MONOTONIC;
	for (int i = 0; i < ncpus; i++) {
		err = dc_ring_open(&ring[i], &attr, child, cpus[i], RING_PAGES, i);
		if (err) {
			kill(child, SIGKILL);
			ksft_exit_fail_msg("event on CPU %d: %s\n", cpus[i], strerror(-err));
		}
	}
	if (dc_rings_ioctl(ring, ncpus, PERF_EVENT_IOC_ENABLE))
		ksft_exit_fail_msg("enable: %s\n", strerror(errno));
	pidfd = syscall(__NR_pidfd_open, child, 0);
	if (pidfd < 0)
		ksft_exit_fail_msg("pidfd_open: %s\n", strerror(errno));
	__atomic_store_n(&shm->start, 1, __ATOMIC_RELEASE);

	for (;;) {
		struct timespec ts = { 0, 2000000 };
		int r;
		pid_t w;

		/*
		 * No poll(): once the leader that owns the events is gone
		 * (the first odd round) they report POLLHUP, while the
		 * threads' inherited events go on writing to their rings.
		 */
		nanosleep(&ts, NULL);
		for (int i = 0; i < ncpus; i++)
			dc_ring_drain(&ring[i], log);
		for (int k = 0; k < NR_TP; k++)
			dc_tp_collect(tp[k], ncpus, &tp_hits[k]);
		r = __atomic_load_n(&shm->cur, __ATOMIC_ACQUIRE);
		if (r >= 0 && r < NR_ROUNDS && !go_ns[r] &&
		    __atomic_load_n(&shm->r[r].ready, __ATOMIC_ACQUIRE) == NR_SLOTS) {
			if (waiting != r) {
				waiting = r;
				ready_ns = now_ns();
				for (int k = 0; k < NR_SLOTS; k++) {
					hfd[k] = -1;
					drained[k] = 0;
				}
			}
			bool all = siblings_pending(log, r, &scan_from);

			/* Not in the first 100 ms: the copy may be under way. */
			for (int k = 0; k < NR_SLOTS && !all &&
			     now_ns() - ready_ns > 100000000ULL; k++)
				if (slot_role(r, k) == ROLE_WRITER && !pend[r][k])
					drain_writer(pidfd, r, k, &hfd[k], &drained[k]);

			if (!all && now_ns() - ready_ns >= ROUND_TIMEOUT_NS) {
				timed_out[r] = true;
				ksft_print_msg("round %d: not every writer and reader was sampled in its last system call within %llu s; exec anyway\n",
					       r, ROUND_TIMEOUT_NS / 1000000000ULL);
				print_threads(r);
			}
			if (all || timed_out[r]) {
				for (int k = 0; k < NR_SLOTS; k++) {
					if (hfd[k] >= 0)
						close(hfd[k]);
					drains += drained[k] > 0;
				}
				if (now_ns() - t0 > RUN_BUDGET_NS)
					__atomic_store_n(&shm->stop, 1, __ATOMIC_RELEASE);
				go_ns[r] = now_ns();
				scan_from = log->nr_samples;
				__atomic_store_n(&shm->r[r].go, 1, __ATOMIC_RELEASE);
			}
		}
		w = waitpid(child, &st, WNOHANG);
		if (w == child)
			break;
		if (now_ns() - t0 > RUN_TIMEOUT_NS) {
			ksft_print_msg("the exec chain did not end within %llu s (round %d)\n",
				       RUN_TIMEOUT_NS / 1000000000ULL, r);
			kill(child, SIGKILL);
			waitpid(child, &st, 0);
			break;
		}
	}
	/* The process is gone: whatever its exits wrote is in the rings. */
	for (int i = 0; i < ncpus; i++) {
		long long lost;

		dc_ring_drain(&ring[i], log);
		lost = dc_ring_read_lost(&ring[i], log);
		if (lost < 0)
			ksft_exit_fail_msg("reading the lost count of CPU %d's ring: %s\n",
					   cpus[i], strerror(-lost));
		dc_ring_unmap(&ring[i]);
		close(ring[i].fd);
	}
	/* And its deaths' tracepoint samples, with the rings' drops. */
	for (int k = 0; k < NR_TP; k++) {
		err = dc_tp_finish(tp[k], ncpus, &tp_hits[k]);
		if (err)
			ksft_exit_fail_msg("reading the lost counts of the %s tracepoint: %s\n",
					   tp_what[k], strerror(-err));
	}
	close(pidfd);
	ksft_print_msg("%d rounds in %llu ms (%d writers drained until sampled), %zu samples, %zu deferred records, lost %llu, malformed %llu\n",
		       __atomic_load_n(&shm->cur, __ATOMIC_ACQUIRE),
		       (unsigned long long)(now_ns() - t0) / 1000000, drains, log->nr_samples,
		       log->nr_deferred, (unsigned long long)log->lost,
		       (unsigned long long)log->malformed);
	return st;
}

/* ---- the checks ---- */

static struct dc_rec_key *keys;
static size_t nkeys;

/* The records with @cookie, any tid: the first's index, their number. */
static long recs_of(uint64_t cookie, long *n)
{
	size_t lo = 0, hi = nkeys, i;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (keys[mid].cookie < cookie)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (i = lo; i < nkeys && keys[i].cookie == cookie; i++)
		;
	*n = i - lo;
	return i > lo ? keys[lo].idx : -1;
}

/* Who @tid was (for the pid: its last round; see the callers). */
static bool tid_lookup(uint32_t tid, struct tid_info *ti)
{
	bool found = false;

	memset(ti, 0, sizeof(*ti));
	ti->round = -1;
	for (int r = 0; r < NR_ROUNDS; r++) {
		for (int k = 0; k < NR_SLOTS; k++) {
			if (shm->r[r].tid[k] != (int)tid)
				continue;
			found = true;
			ti->round = r;
			ti->slot = k;
			ti->role = slot_role(r, k);
			ti->deaths += ti->role != ROLE_EXEC;
		}
	}
	if (tid == (uint32_t)child)
		ti->deaths++;	/* the last image's exit */
	return found || tid == (uint32_t)child;
}

/* Is @tid the exec'ing thread of an odd round (which then takes the pid)? */
static bool exec_thread(uint32_t tid)
{
	for (int r = 1; r < NR_ROUNDS; r += 2)
		if (shm->r[r].tid[2] == (int)tid)
			return true;
	return false;
}

/* The user stacks of the roles' leaves, whole (DC_THREAD_FRAMES, DC_MAIN_FRAMES). */
static const char *const w_thr[] = {
	"writev_leaf", "writer_role", "run_role", DC_THREAD_FRAMES
};
static const char *const w_lead[] = {
	"writev_leaf", "writer_role", "run_role", "child_round", DC_MAIN_FRAMES
};
static const char *const rv_thr[] = {
	"readv_leaf", "reader_role", "run_role", DC_THREAD_FRAMES
};
static const char *const e_thr[] = {
	"wait_leaf", "exec_role", "run_role", DC_THREAD_FRAMES
};
static const char *const e_lead[] = {
	"wait_leaf", "exec_role", "run_role", "child_round", DC_MAIN_FRAMES
};
static const char *const spin_chain[] = {
	"spin_leaf", "spinner_role", "run_role", DC_THREAD_FRAMES
};

/*
 * The exact stack of a record of @s's entry, for the entries whose stack
 * is known: the writers' write(), the reader's read(), the exec'ing
 * thread's waits (execve() is checked apart); the leader's frames differ
 * from a thread's.  NULL: not one of those.
 */
static const char *const *want_stack(const struct dc_sample *s,
				     const struct tid_info *ti, int *n)
{
	bool lead = s->tid == (uint32_t)child;

	if (dc_in_exit_path(s) || dc_in_signal_path(s))
		return NULL;
	if (dc_kernel_stack_has(s, "do_writev") && (lead || ti->role == ROLE_WRITER)) {
		*n = lead ? ARRAY_SIZE(w_lead) : ARRAY_SIZE(w_thr);
		return lead ? w_lead : w_thr;
	}
	if (!lead && ti->role == ROLE_READER && dc_kernel_stack_has(s, "do_readv")) {
		*n = ARRAY_SIZE(rv_thr);
		return rv_thr;
	}
	if (in_nanosleep(s) && (lead || ti->role == ROLE_EXEC)) {
		*n = lead ? ARRAY_SIZE(e_lead) : ARRAY_SIZE(e_thr);
		return lead ? e_lead : e_thr;
	}
	return NULL;
}

struct counts {
	size_t cookies, matched, exiting, excused, bad, stacks, stack_bad;
	size_t in_exec, exec_ok, exec_old_tid, spin, spin_bad;
	size_t pending, pending_ok, nonuser;
	size_t fewest[2];	/* a writer's, the reader's samples before the go */
	/* the deaths: traced (once, with a cookie), in a pending entry, recorded */
	size_t deaths, traced, in_pending, death_rec, tp_only;
	size_t excused_work;	/* excused samples in exit_group()'s entry work */
};

static void bad_msg(struct counts *c, const struct dc_sample *s,
		    const struct dc_deferred *d, const char *fmt, ...)
{
	va_list ap;

	if (c->bad++ >= 5)
		return;
	va_start(ap, fmt);
	printf("# ");
	vprintf(fmt, ap);
	va_end(ap);
	if (s)
		dc_print_merged(s, d);
}

/*
 * One death of the child: task @tid's hits of tracepoint @tp in
 * (@from, @to) (@to 0: no end), of which there must be exactly one, with a
 * cookie, @pending's if that is not 0 (the entry a writer or the reader
 * was sampled pending in: it dies in it); it gets its mark.  On Rust the
 * entry's record, of @tid, must be in @log (the record of the entry a
 * task dies in is written at the latest in do_exit(), before the events
 * go); on C it may be the exit loss.
 */
static void check_death(struct dc_log *log, struct counts *c, int tp, int r,
			const char *who, uint32_t tid, uint64_t from, uint64_t to,
			uint64_t pending)
{
	struct dc_tp_hits *h = &tp_hits[tp];
	struct dc_tp_hit *hit = NULL;
	size_t n = 0;
	long nrec;

	c->deaths++;
	for (size_t i = 0; i < h->nr; i++) {
		struct dc_tp_hit *x = &h->v[i];

		if (x->pid != (uint32_t)child || x->tid != tid || x->time <= from ||
		    (to && x->time >= to))
			continue;
		if (!n++)
			hit = x;
	}
	if (n != 1 || !hit->cookie || (pending && hit->cookie != pending)) {
		bad_msg(c, NULL, NULL, "round %d: %s tid %u: %zu %s samples in its death's window, the first's cookie %#llx (the pending entry's %#llx, 0: none)\n",
			r, who, tid, n, tp_what[tp],
			hit ? (unsigned long long)hit->cookie : 0ULL,
			(unsigned long long)pending);
		return;
	}
	hit->mark = tp_what[tp];
	c->traced++;
	c->in_pending += pending != 0;
	dc_find_deferred(log, child, tid, hit->cookie, &nrec);
	c->death_rec += nrec == 1;
	if (!c_kernel() && nrec != 1)
		bad_msg(c, NULL, NULL, "round %d: %s tid %u died in the entry of cookie %#llx (%s), which has %ld records of its tid\n",
			r, who, tid, (unsigned long long)hit->cookie, tp_what[tp], nrec);
}

/*
 * The deaths, each traced once (check_death()): in every round that
 * exec'd, the siblings the exec killed, after the harness let the round
 * go and before the new image's main(); the last image's exit_group(),
 * after its main().  No other hit of the child's pid, and the
 * tracepoints lost nothing and had no record.
 */
static void check_deaths(struct dc_log *log, struct counts *c, int rounds)
{
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < NR_SLOTS; k++) {
			int role = slot_role(r, k);

			if (role == ROLE_EXEC)
				continue;
			check_death(log, c, TP_KILL, r, role_name[role], shm->r[r].tid[k],
				    go_ns[r], shm->r[r + 1].start_ns,
				    last_call(role) ? pend[r][k] : 0);
		}
	}
	if (rounds >= 0)
		check_death(log, c, TP_EXIT, rounds, "last image", child,
			    shm->r[rounds].start_ns, 0, 0);
	for (int k = 0; k < NR_TP; k++) {
		const struct dc_tp_hits *h = &tp_hits[k];

		for (size_t i = 0; i < h->nr; i++)
			if (h->v[i].pid == (uint32_t)child && !h->v[i].mark)
				bad_msg(c, NULL, NULL, "%s sample of the child (tid %u, cookie %#llx) is none of its deaths\n",
					tp_what[k], h->v[i].tid,
					(unsigned long long)h->v[i].cookie);
		if (h->log.lost || h->log.lost_records || h->log.malformed || h->records)
			bad_msg(c, NULL, NULL, "the %s tracepoint: %llu lost in %llu PERF_RECORD_LOST, %llu malformed, %llu deferred records (none expected)\n",
				tp_what[k], (unsigned long long)h->log.lost,
				(unsigned long long)h->log.lost_records,
				(unsigned long long)h->log.malformed,
				(unsigned long long)h->records);
	}
}

/* The death hit (check_deaths() marked it) of @pid, @tid in @cookie's entry. */
static const struct dc_tp_hit *death_hit(uint32_t pid, uint32_t tid, uint64_t cookie,
					 int *tp)
{
	for (*tp = 0; *tp < NR_TP; (*tp)++) {
		const struct dc_tp_hit *x = dc_tp_find(&tp_hits[*tp], pid, tid, cookie);

		if (x && x->mark)
			return x;
	}
	return NULL;
}

/*
 * Is @s, a sample of the entry a death was traced in by tracepoint @tp,
 * where that death's request may come first: in the signal or exit path,
 * or, for the last image's exit_group(), in that system call before
 * do_group_exit(): in __x64_sys_exit_group(), or in do_syscall_64()'s
 * entry work before it calls the handler (x64_sys_call() not on the
 * stack), where the sys_enter tracepoint itself runs
 * (trace_syscall_enter()).  The tracepoint's cookie says which system
 * call the entry is; the entry ends in do_exit().
 */
static bool in_death_path(const struct dc_sample *s, int tp)
{
	if (dc_in_exit_path(s) || dc_in_signal_path(s))
		return true;
	return tp == TP_EXIT &&
	       (dc_kernel_stack_has(s, "__x64_sys_exit_group") ||
		(dc_kernel_stack_has(s, "do_syscall_64") &&
		 !dc_kernel_stack_has(s, "x64_sys_call")));
}

/* The entries excused as the upstream exit loss: cookie, tid. */
static struct { uint64_t cookie; uint32_t tid; } excused[NR_ROUNDS * NR_SLOTS + 1];
static int nr_excused;

/*
 * An entry without a record, on the C kernel: the upstream exit loss if
 * the entry's first request came after get_signal() ran the task_work
 * (or in exit_group()) and do_exit() detached the perf context before it
 * ran the unwind.  The evidence: the entry is the one a death of the tid
 * was traced in (a marked death hit of its pid, tid and cookie, see the
 * top), every sample of the cookie is in the signal or exit path (or
 * exit_group()'s entry work: in_death_path()), at most one entry per death
 * of the tid.  Returns whether @s's entry is excused; prints it once, with
 * the hit.
 */
static bool exit_loss(const struct dc_log *log, const struct dc_sample *s,
		      const struct tid_info *ti)
{
	const struct dc_tp_hit *x;
	int same_tid = 0, tp;

	if (!c_kernel() || !ti->deaths)
		return false;
	for (int k = 0; k < nr_excused; k++) {
		if (excused[k].cookie == s->cookie && excused[k].tid == s->tid)
			return true;
		same_tid += excused[k].tid == s->tid;
	}
	if (same_tid >= ti->deaths || nr_excused == ARRAY_SIZE(excused))
		return false;
	x = death_hit(s->pid, s->tid, s->cookie, &tp);
	if (!x)
		return false;
	for (size_t j = 0; j < log->nr_samples; j++)
		if (log->samples[j].cookie == s->cookie && !in_death_path(&log->samples[j], tp))
			return false;
	excused[nr_excused].cookie = s->cookie;
	excused[nr_excused++].tid = s->tid;
	ksft_print_msg("upstream exit loss (C only): tid %u (%s, last in round %d) cookie %#llx: no record, its samples all in the signal or exit path%s, the entry its %s was traced in (pid %u tid %u time %llu):\n",
		       s->tid, s->tid == (uint32_t)child ? "the pid" : role_name[ti->role],
		       ti->round, (unsigned long long)s->cookie,
		       tp == TP_EXIT ? " or exit_group()'s entry work" : "", tp_what[tp], x->pid, x->tid,
		       (unsigned long long)x->time);
	dc_print_merged(s, NULL);
	return true;
}

/*
 * Every sample with a cookie: exactly one record, of the sample's tid
 * (in execve(): of the pid), or, on the C kernel only, the upstream exit
 * loss with its evidence.
 */
static void check_samples(struct dc_log *log, struct counts *c)
{
	for (size_t i = 0; i < log->nr_samples; i++) {
		const struct dc_sample *s = &log->samples[i];
		const struct dc_deferred *d;
		const char *const *want;
		struct tid_info ti;
		int nwant, where;
		bool exec;
		long idx, n;

		if (s->pid != (uint32_t)child || !tid_lookup(s->tid, &ti)) {
			bad_msg(c, s, NULL, "sample %zu of pid %u tid %u: not a thread of the child %d\n",
				i, s->pid, s->tid, child);
			continue;
		}
		if (!s->cookie) {
			if (dc_in_exit_path(s)) {
				c->exiting++;
				continue;
			}
			bad_msg(c, s, NULL, "sample %zu (tid %u) has no cookie, not exiting\n",
				i, s->tid);
			continue;
		}
		c->cookies++;
		idx = recs_of(s->cookie, &n);
		if (n == 0 && exit_loss(log, s, &ti)) {
			c->excused++;
			c->excused_work += !dc_in_exit_path(s) && !dc_in_signal_path(s);
			continue;
		}
		if (n != 1) {
			bad_msg(c, s, NULL, "sample %zu (tid %u, %s, last in round %d): cookie %#llx has %ld records\n",
				i, s->tid, s->tid == (uint32_t)child ? "the pid" : role_name[ti.role],
				ti.round, (unsigned long long)s->cookie, n);
			continue;
		}
		d = &log->deferred[idx];
		/*
		 * The exec'ing thread's entry: a sample in execve(), or one
		 * of an odd round's exec'ing thread whose record is of the
		 * pid, the tid it took in de_thread() (a sample at the
		 * syscall's entry or exit need not show execve()).  Its
		 * record is of the pid.  Any other: of the sample's tid.
		 */
		exec = has_any(s, execve_fns) ||
		       (exec_thread(s->tid) && d->tid == (uint32_t)child);
		if (d->pid != (uint32_t)child ||
		    (exec ? d->tid != (uint32_t)child ||
			    (s->tid != (uint32_t)child && !exec_thread(s->tid)) :
			    d->tid != s->tid)) {
			bad_msg(c, s, d, "sample %zu (tid %u%s): the record of cookie %#llx is of pid %u tid %u\n",
				i, s->tid, exec ? ", in execve" : "",
				(unsigned long long)s->cookie, d->pid, d->tid);
			continue;
		}
		c->matched++;
		log->deferred[idx].matched++;
		if (exec) {
			c->in_exec++;
			c->exec_old_tid += s->tid != (uint32_t)child;
			if (d->nr == 1 && d->ips[0] == start_addr)
				c->exec_ok++;
			else if (c->in_exec - c->exec_ok <= 3)
				bad_msg(c, s, d, "sample %zu of the exec: the record is not the new image's _start alone\n",
					i);
			continue;
		}
		want = want_stack(s, &ti, &nwant);
		if (want) {
			c->stacks++;
			if (!dc_stack_is(d->ips, d->nr, want, nwant, &where) &&
			    c->stack_bad++ < 3) {
				ksft_print_msg("sample %zu (tid %u): wrong stack at frame %d, want %s <- %s ...\n",
					       i, s->tid, where, want[0], want[1]);
				dc_print_merged(s, d);
			}
		}
		if (ti.role == ROLE_SPINNER && s->tid != (uint32_t)child) {
			bool frameless;
			int ok = dc_check_leaf_record(d, "spin_leaf", spin_chain,
						      ARRAY_SIZE(spin_chain), &frameless);

			c->spin += ok >= 0;
			if (!ok && c->spin_bad++ < 3) {
				ksft_print_msg("sample %zu (spinner tid %u): wrong stack\n", i, s->tid);
				dc_print_merged(s, d);
			}
		}
	}
}

/*
 * Records: every one has a sample (check_samples() counted them) but one
 * of a death's entry (check_deaths() marked its hit), which the
 * tracepoint's own request may have brought about (counted apart); user
 * addresses only.  Upstream's walk records a return address read from a
 * frameless function's stack however it looks (docs/deviations.md),
 * glibc's start-up code here (argv bytes): below the kernel's addresses
 * but above user space.  Counted, allowed on the C kernel only; the Rust
 * walk ends before it.
 */
static void check_records(const struct dc_log *log, struct counts *c)
{
	int tp;

	for (size_t i = 0; i < log->nr_deferred; i++) {
		const struct dc_deferred *d = &log->deferred[i];

		if (!d->matched && death_hit(d->pid, d->tid, d->cookie, &tp))
			c->tp_only++;	/* asked for by the tracepoint */
		else if (!d->matched)
			bad_msg(c, NULL, NULL, "record with cookie %#llx (pid %u tid %u, %u entries) has no sample\n",
				(unsigned long long)d->cookie, d->pid, d->tid, d->nr);
		if (d->misc != PERF_RECORD_MISC_USER)
			bad_msg(c, NULL, NULL, "record with cookie %#llx: misc %#x\n",
				(unsigned long long)d->cookie, d->misc);
		for (uint32_t j = 0; j < d->nr; j++) {
			const struct dc_sample *s = NULL;
			bool kaddr = d->ips[j] >= DC_KERNEL_MIN;

			if (d->ips[j] < DC_USER_MAX)
				continue;
			for (size_t k = 0; k < log->nr_samples && !s; k++)
				if (log->samples[k].cookie == d->cookie)
					s = &log->samples[k];
			if (!kaddr && c_kernel()) {
				if (c->nonuser++ < 3) {
					ksft_print_msg("record with cookie %#llx (tid %u): entry %u of %u is %#llx, a non-user return address (upstream C records it)\n",
						       (unsigned long long)d->cookie, d->tid, j,
						       d->nr, (unsigned long long)d->ips[j]);
					if (s)
						dc_print_merged(s, d);
				}
				break;
			}
			bad_msg(c, s, d, "record with cookie %#llx (tid %u): entry %u of %u is %#llx, %s\n",
				(unsigned long long)d->cookie, d->tid, j, d->nr,
				(unsigned long long)d->ips[j],
				kaddr ? "a kernel address" : "not a user address");
			break;
		}
	}
}

/*
 * The siblings' entries pending at the exec (the writers' write(), the
 * reader's readv()): their one record, of their tid, written after the
 * harness let the round exec and before the new image's main(), with the
 * whole stack of the system call.  A missing one on the C kernel would be
 * an upstream bug of its own (the record is due in get_signal(), before
 * the exit): it is printed with a token.
 */
static void check_pending(const struct dc_log *log, struct counts *c, int rounds)
{
	for (int r = 0; r < rounds; r++) {
		uint64_t next = shm->r[r + 1].start_ns;

		for (int k = 0; k < NR_SLOTS; k++) {
			uint32_t tid = shm->r[r].tid[k];
			int role = slot_role(r, k), where, nwant;
			const char *const *want;
			const struct dc_deferred *d;
			bool lead = k == 0;
			size_t before;
			long idx, n;

			if (!last_call(role))
				continue;
			c->pending++;
			if (!pend[r][k]) {
				const struct dc_sample *last = NULL;
				size_t nr = 0;

				for (size_t i = 0; i < log->nr_samples; i++) {
					if (log->samples[i].tid == tid) {
						nr++;
						last = &log->samples[i];
					}
				}
				ksft_print_msg("round %d: %s tid %u was not seen sampled in its %s before the exec (%zu samples of it, the last:)\n",
					       r, role_name[role], tid, last_call(role), nr);
				if (last)
					dc_print_merged(last, NULL);
				continue;
			}
			if (role == ROLE_READER) {
				want = rv_thr;
				nwant = ARRAY_SIZE(rv_thr);
			} else {
				want = lead ? w_lead : w_thr;
				nwant = lead ? ARRAY_SIZE(w_lead) : ARRAY_SIZE(w_thr);
			}
			before = 0;
			for (size_t i = 0; i < log->nr_samples; i++)
				before += log->samples[i].cookie == pend[r][k] &&
					  log->samples[i].time < go_ns[r];
			if (before < c->fewest[role == ROLE_READER] ||
			    !c->fewest[role == ROLE_READER])
				c->fewest[role == ROLE_READER] = before;
			idx = recs_of(pend[r][k], &n);
			d = idx >= 0 ? &log->deferred[idx] : NULL;
			if (n == 1 && d->tid == tid && d->time > go_ns[r] && next &&
			    d->time < next && dc_stack_is(d->ips, d->nr, want, nwant, &where)) {
				c->pending_ok++;
				continue;
			}
			ksft_print_msg("round %d: %s tid %u%s, cookie %#llx pending at the exec: %ld records%s",
				       r, role_name[role], tid, lead ? " (the leader)" : "",
				       (unsigned long long)pend[r][k], n, d ? "" : "\n");
			if (d)
				printf(", of tid %u, written %lld us after the round's go, %lld us before the new image's main()\n",
				       d->tid, (long long)(d->time - go_ns[r]) / 1000,
				       (long long)(next - d->time) / 1000);
			if (c_kernel() && !n)
				ksft_print_msg("upstream bug: mtexec-pending-loss (round %d tid %u cookie %#llx)\n",
					       r, tid, (unsigned long long)pend[r][k]);
			for (size_t i = 0; i < log->nr_samples; i++) {
				if (log->samples[i].cookie == pend[r][k]) {
					dc_print_merged(&log->samples[i], d);
					break;
				}
			}
		}
	}
}

static __attribute__((noinline)) void mtexec(void)
{
	struct counts c = { 0 };
	struct dc_log log = { 0 };
	int st, rounds, timeouts = 0;

	start_addr = dc_sym_addr("_start", &start_size);
	if (!start_addr)
		ksft_exit_fail_msg("no _start symbol\n");
	st = run(&log);
	rounds = __atomic_load_n(&shm->cur, __ATOMIC_ACQUIRE);
	for (int r = 0; r < NR_ROUNDS; r++)
		timeouts += timed_out[r];
	keys = dc_rec_index(&log);
	if (!keys)
		ksft_exit_fail_msg("out of memory\n");
	nkeys = log.nr_deferred;
	check_deaths(&log, &c, rounds);
	check_samples(&log, &c);
	check_records(&log, &c);
	check_pending(&log, &c, rounds);

	ksft_print_msg("%zu samples with a cookie, %zu matched, %zu without a cookie in the exit path, %zu violations; exit-loss entries excused on upstream C, each a traced death's: %d (%zu samples, %zu of them in exit_group()'s entry work)\n",
		       c.cookies, c.matched, c.exiting, c.bad, nr_excused, c.excused,
		       c.excused_work);
	ksft_print_msg("deaths: %zu (the siblings' SIGKILL in %d rounds, the last image's exit_group()), %zu traced once with a cookie in their window (%zu of them in the writer's or reader's pending entry); their entry's record of their tid in the per-task event: %zu (%s), %zu records of such an entry without a sample there\n",
		       c.deaths, rounds, c.traced, c.in_pending, c.death_rec,
		       c_kernel() ? "upstream C loses a request pending at exit" : "all required on Rust",
		       c.tp_only);
	for (int k = 0; k < NR_TP; k++)
		ksft_print_msg("the %s tracepoint: %llu samples in all (any task), lost %llu in %llu PERF_RECORD_LOST, malformed %llu, %llu records in its rings\n",
			       tp_what[k], (unsigned long long)tp_hits[k].samples,
			       (unsigned long long)tp_hits[k].log.lost,
			       (unsigned long long)tp_hits[k].log.lost_records,
			       (unsigned long long)tp_hits[k].log.malformed,
			       (unsigned long long)tp_hits[k].records);
	ksft_print_msg("pending at the exec: %zu of %zu siblings' last entries (writers' writev, reader's readv) recorded as required; fewest samples of one before the go: %zu (writer), %zu (reader)\n",
		       c.pending_ok, c.pending, c.fewest[0], c.fewest[1]);
	ksft_print_msg("exact stacks: %zu write/readv/wait samples (%zu wrong), %zu spinner samples in its loop (%zu wrong), %zu of the exec'ing thread's execve() (%zu with its old tid), %zu of them _start alone\n",
		       c.stacks, c.stack_bad, c.spin, c.spin_bad, c.in_exec,
		       c.exec_old_tid, c.exec_ok);

	ksft_test_result(WIFEXITED(st) && !WEXITSTATUS(st) && rounds >= MIN_ROUNDS &&
			 !timeouts && !shm->fail && !log.lost && !log.malformed,
			 "%d multithreaded execs (at least %d; leader and non-leader by turns), each with its writers and reader sampled in their last system call first (%d rounds not), the chain exited 0 (status %#x, child failure at line %d), lost %llu, malformed %llu\n",
			 rounds, MIN_ROUNDS, timeouts, st, shm->fail,
			 (unsigned long long)log.lost, (unsigned long long)log.malformed);
	ksft_test_result(rounds >= MIN_ROUNDS && c.pending == 3 * (size_t)rounds &&
			 c.pending_ok == c.pending,
			 "the %zu siblings' entries pending at the exec each have exactly one record of their tid, written after the exec began and before the new image's main(), the whole stack of the writev() or readv() (%zu did)\n",
			 c.pending, c.pending_ok);
	ksft_test_result(!c.bad && c.matched + c.excused == c.cookies &&
			 (c_kernel() || !c.excused) && rounds >= 0 &&
			 c.deaths == (NR_SLOTS - 1) * (size_t)rounds + 1 && c.traced == c.deaths &&
			 (c_kernel() || c.death_rec == c.deaths),
			 "every sample's cookie has exactly one record of its task, every record a sample (or a traced death's entry: %zu), no kernel address (%zu matched, %d entries excused on C, each one a traced death was in, %zu records with a non-user return address%s, %zu violations); every death traced once with a cookie (%zu of %zu), its record there on Rust (%zu)\n",
			 c.tp_only, c.matched, nr_excused, c.nonuser,
			 c_kernel() ? ", upstream's, allowed on C" : "", c.bad, c.traced, c.deaths,
			 c.death_rec);
	ksft_test_result(c.stacks && !c.stack_bad && c.spin && !c.spin_bad,
			 "exact stacks of the writes, readvs and waits (%zu samples) and of the spinner's loop (%zu)\n",
			 c.stacks, c.spin);
	ksft_test_result(c.in_exec && c.exec_ok == c.in_exec,
			 "the exec'ing thread's %zu samples of its execve() (at least 1 needed; %zu with its old tid) each get one record of the pid at its first return to user space: the new image's _start alone (%zu did)\n",
			 c.in_exec, c.exec_old_tid, c.exec_ok);
	free(keys);
	dc_log_free(&log);
	for (int k = 0; k < NR_TP; k++)
		dc_tp_free(&tp_hits[k]);
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "--round")) {
		shm_fd = atoi(argv[3]);
		child_round(atoi(argv[2]));
		_exit(3);
	}

	ksft_print_header();
	ksft_set_plan(5);
	if (dc_syms_load())
		ksft_exit_fail_msg("cannot read own symbol table\n");
	dc_kallsyms_load();
	mtexec();
	dc_finished();
}
