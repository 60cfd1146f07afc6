// SPDX-License-Identifier: GPL-2.0
/*
 * Deferred callchains and io_uring: a task_work run inside a system call,
 * and user workers (kernel-side threads of a user process).
 *
 * 1. io_cqring_wait() runs the task's task_work (io_run_task_work(),
 *    task_work_run()) before it waits, inside io_uring_enter(): a deferred
 *    unwind requested earlier in that entry runs there, not on the way back
 *    to user space.  A child makes NR_WAITS io_uring_enter() calls, each
 *    submitting a NOP and a 50 ms TIMEOUT and waiting for both, under two
 *    per-task tracepoint events with defer_callchain and one ring:
 *    io_uring_submit_req (fires for each SQE, in io_submit_sqes(), before
 *    the wait) and io_uring_cqring_wait (fires in io_cqring_wait() after its
 *    first io_run_task_work(), when it has to wait).  Asserted, for each
 *    entry, exactly: two submit samples and one record for their cookie
 *    (the whole user stack of the call), in that ring order; and where the
 *    entry waited (the timeout not already done), one wait sample with the
 *    same cookie, written after the record.  Both kernels do the same:
 *    the request of the wait sample finds its callback already run in this
 *    entry and is answered "already done" (upstream's unwind_completed and
 *    mask rule), so no record follows it.  perf 7.3 stitches a sample to
 *    the first record of its cookie that comes after it
 *    (evlist__deliver_deferred_callchain()), so such a sample reaches perf
 *    script without its user stack: a documented limit
 *    (docs/deviations.md), counted here with its evidence (tid, cookie,
 *    io_cqring_wait on its kernel stack, the record before it).
 * 2. The submitting thread under a 10 kHz cpu-clock event (inherited, on
 *    every CPU, as perf record's) while io-wq workers read /dev/zero for it
 *    (IOSQE_ASYNC): every sample of the thread has a cookie and exactly one
 *    record of its tid.  A record written before one of its samples (by
 *    time: per-CPU rings, CLOCK_MONOTONIC) is allowed only with the
 *    evidence on the sample's kernel stack that the entry's task_work had
 *    run, each kind counted and printed: inside an io_uring_enter() call
 *    (its frames; in its exit work, its record's first frame at
 *    uring_leaf's syscall: the window of test 1); on the way out after it: in the task_work itself
 *    (task_work_run(): the record's time is taken before it is written, so
 *    a sample that interrupts its output comes after it), in the
 *    exit-to-user loop's schedule() after it, in the signal path.  A sample
 *    of the final stop (dc_in_final_stop(): the signal path, its tid's last
 *    cookie) may also have no record (due at the next return to user
 *    space; the child is killed first).  On a kernel whose unwinder cuts
 *    a stack at a retpoline thunk (ORC: make check-full's rust-defconfig)
 *    a stack that ends at one shows no place; such a sample is allowed
 *    with the evidence of the times alone, counted apart: its record was
 *    written after an earlier sample of its entry, so in the entry.  All
 *    of these samples reach perf 7.3 without their user stack.  Every
 *    record in uring_leaf is exactly uring_leaf <- read_entries <- profile
 *    <- workers <- main <- __libc_start_call_main, or, taken at
 *    uring_leaf's frameless entry or exit (an interrupt at its push %rbp,
 *    where a frame-pointer walk skips its caller), that without
 *    read_entries, counted and printed.
 * 3. The io-wq workers of that run (iou-wrk-*, PF_IO_WORKER|PF_USER_WORKER:
 *    is_user_task() is false, they never return to user space; the child
 *    has no thread of its own, so any other tid of it is one): none of
 *    their samples has a user ip or callchain (no PERF_CONTEXT_USER, no
 *    PERF_CONTEXT_USER_DEFERRED, no cookie), and no record carries their
 *    tid.  At least MIN_WORKER_SAMPLES with io_wq_worker() on their kernel
 *    stack are required.
 * 4. The same for an SQPOLL ring's submission thread (iou-sqp-*,
 *    io_sq_thread(), which issues the reads itself), and for the thread
 *    waiting on that ring (as test 2).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/io_uring.h>

#include "../kselftest.h"
#include "dc_util.h"

#define NR_WAITS		8
#define WAIT_TIMEOUT_NS		50000000LL
#define NR_READS		16
#define READ_SIZE		(4 << 20)
#define READ_ROUNDS		4
#define MIN_WORKER_SAMPLES	20
#define RING_PAGES		512
#define CHILD_TIMEOUT_S		120

struct uring {
	int fd;
	unsigned int *sq_tail, *sq_mask, *sq_array, *sq_flags;
	unsigned int *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
};

static int uring_init(struct uring *u, unsigned int entries, unsigned int flags)
{
	struct io_uring_params p;
	char *sq, *cq;

	memset(&p, 0, sizeof(p));
	p.flags = flags;
	p.sq_thread_idle = 1000;	/* ms, SQPOLL only */
	u->fd = syscall(__NR_io_uring_setup, entries, &p);
	if (u->fd < 0)
		return -errno;
	sq = mmap(NULL, p.sq_off.array + p.sq_entries * sizeof(unsigned int),
		  PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, u->fd,
		  IORING_OFF_SQ_RING);
	cq = mmap(NULL, p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe),
		  PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, u->fd,
		  IORING_OFF_CQ_RING);
	u->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe),
		       PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, u->fd,
		       IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || u->sqes == MAP_FAILED)
		return -errno;
	u->sq_tail = (unsigned int *)(sq + p.sq_off.tail);
	u->sq_mask = (unsigned int *)(sq + p.sq_off.ring_mask);
	u->sq_array = (unsigned int *)(sq + p.sq_off.array);
	u->sq_flags = (unsigned int *)(sq + p.sq_off.flags);
	u->cq_head = (unsigned int *)(cq + p.cq_off.head);
	u->cq_tail = (unsigned int *)(cq + p.cq_off.tail);
	u->cq_mask = (unsigned int *)(cq + p.cq_off.ring_mask);
	u->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	return 0;
}

/* The next SQE, zeroed; published by uring_publish(). */
static struct io_uring_sqe *uring_sqe(struct uring *u, unsigned int *tail)
{
	unsigned int idx = *tail & *u->sq_mask;

	memset(&u->sqes[idx], 0, sizeof(u->sqes[idx]));
	u->sq_array[idx] = idx;
	(*tail)++;
	return &u->sqes[idx];
}

static void uring_publish(struct uring *u, unsigned int tail)
{
	__atomic_store_n(u->sq_tail, tail, __ATOMIC_RELEASE);
}

/* Reap every CQE: the number reaped, and how many had res < 0 but @ok_res. */
static int uring_reap(struct uring *u, int ok_res, int *bad)
{
	unsigned int head = *u->cq_head;
	int n = 0;

	while (head != __atomic_load_n(u->cq_tail, __ATOMIC_ACQUIRE)) {
		int res = u->cqes[head & *u->cq_mask].res;

		if (res < 0 && res != ok_res)
			(*bad)++;
		head++;
		n++;
	}
	__atomic_store_n(u->cq_head, head, __ATOMIC_RELEASE);
	return n;
}

/*
 * io_uring_enter(), made inline (six arguments: dc_syscall3() has three),
 * so that the user stack of every sample inside it starts in the caller.
 */
static inline __attribute__((always_inline))
long uring_enter(int fd, unsigned int submit, unsigned int min, unsigned int flags)
{
	register long r10 asm("r10") = flags;
	register long r8 asm("r8") = 0;
	register long r9 asm("r9") = 0;
	long ret;

	asm volatile("syscall"
		     : "=a"(ret)
		     : "0"((long)__NR_io_uring_enter), "D"((long)fd),
		       "S"((long)submit), "d"((long)min), "r"(r10), "r"(r8),
		       "r"(r9)
		     : "rcx", "r11", "memory");
	return ret;
}

/* Every io_uring_enter() of the tests is made here. */
__attribute__((noinline)) long uring_leaf(struct uring *u, unsigned int submit,
					  unsigned int min, unsigned int flags)
{
	long ret;

	DC_KEEP_FRAME();
	ret = uring_enter(u->fd, submit, min, flags);
	asm volatile("" ::: "memory");
	return ret;
}

/* Test 1's child: NR_WAITS entries, each a NOP and a TIMEOUT waited for. */
__attribute__((noinline)) void wait_entries(void *arg)
{
	struct __kernel_timespec ts = { .tv_nsec = WAIT_TIMEOUT_NS };
	struct uring u;
	unsigned int tail;
	int bad = 0;

	(void)arg;
	if (uring_init(&u, 8, 0))
		_exit(10);
	tail = *u.sq_tail;
	for (int i = 0; i < NR_WAITS; i++) {
		struct io_uring_sqe *sqe;

		sqe = uring_sqe(&u, &tail);
		sqe->opcode = IORING_OP_NOP;
		sqe = uring_sqe(&u, &tail);
		sqe->opcode = IORING_OP_TIMEOUT;
		sqe->addr = (unsigned long)&ts;
		sqe->len = 1;
		uring_publish(&u, tail);
		if (uring_leaf(&u, 2, 2, IORING_ENTER_GETEVENTS) != 2)
			_exit(11);
		if (uring_reap(&u, -ETIME, &bad) != 2 || bad)
			_exit(12);
	}
	asm volatile("" ::: "memory");
}

/* Tests 2-4's child: async reads of /dev/zero, by io-wq or SQPOLL. */
__attribute__((noinline)) void read_entries(void *arg)
{
	bool sqpoll = arg != NULL;
	struct uring u;
	unsigned int tail;
	char *buf;
	int fd, bad = 0;

	fd = open("/dev/zero", O_RDONLY);
	buf = mmap(NULL, READ_SIZE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (fd < 0 || buf == MAP_FAILED)
		_exit(20);
	if (uring_init(&u, NR_READS, sqpoll ? IORING_SETUP_SQPOLL : 0))
		_exit(21);
	tail = *u.sq_tail;
	for (int r = 0; r < READ_ROUNDS; r++) {
		int done = 0;

		for (int i = 0; i < NR_READS; i++) {
			struct io_uring_sqe *sqe = uring_sqe(&u, &tail);

			sqe->opcode = IORING_OP_READ;
			sqe->fd = fd;
			sqe->addr = (unsigned long)buf;
			sqe->len = READ_SIZE;
			if (!sqpoll)
				sqe->flags = IOSQE_ASYNC;
		}
		uring_publish(&u, tail);
		while (done < NR_READS) {
			unsigned int flags = IORING_ENTER_GETEVENTS;
			long ret;

			if (sqpoll)
				flags |= IORING_ENTER_SQ_WAKEUP;
			ret = uring_leaf(&u, sqpoll || done ? 0 : NR_READS,
					 NR_READS - done, flags);
			if (ret < 0 && ret != -EINTR)
				_exit(22);
			done += uring_reap(&u, 0, &bad);
		}
		if (bad)
			_exit(23);
	}
	/* The ring goes before the stop: no worker of it is left busy. */
	close(u.fd);
	asm volatile("" ::: "memory");
}

#define MAX_RINGS	8

/*
 * Fork a child that runs @fn(@arg) once told to, then stops itself, and
 * open events on it: with @per_cpu false, the @n events of @attr, the first
 * with a ring that the others write into (PERF_EVENT_IOC_SET_OUTPUT); with
 * @per_cpu true, @attr[0] on each online CPU, each with its own ring (an
 * inherited event's ring must be per CPU: perf_mmap() refuses a per-task
 * one).  Collect every record until the child has stopped, then kill it.
 * Returns the child's pid or -errno.  (dc_profile_child() with several
 * events and rings; its child part is the same, and stays here: the child
 * calls @fn from this frame, which the records' exact stacks name.)
 */
__attribute__((noinline)) pid_t profile(void (*fn)(void *), void *arg,
					struct perf_event_attr *attr, int n,
					bool per_cpu, struct dc_log *log)
{
	struct dc_ring rings[MAX_RINGS];
	int go[2], fds[MAX_RINGS], cpus[MAX_RINGS], st, err = 0;
	int nfds = 0, nrings = 0, ncpus = 0;
	time_t start = time(NULL);
	pid_t pid;
	char c;

	if (per_cpu) {
		ncpus = dc_online_cpus(cpus, MAX_RINGS);
		n = ncpus;
	}
	if (n < 1 || n > MAX_RINGS || pipe(go))
		return -EINVAL;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(3);
		fn(arg);
		asm volatile("" ::: "memory");	/* not a tail call */
		raise(SIGSTOP);
		_exit(0);
	}
	close(go[0]);
	for (int i = 0; i < n; i++) {
		if (per_cpu || i == 0) {
			err = dc_ring_open(&rings[nrings], &attr[per_cpu ? 0 : i],
					   pid, per_cpu ? cpus[i] : -1,
					   RING_PAGES, nrings);
			if (err)
				goto out;
			fds[nfds++] = rings[nrings++].fd;
			continue;
		}
		fds[nfds] = dc_open(&attr[i], pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
		if (fds[nfds] < 0) {
			err = -errno;
			goto out;
		}
		if (ioctl(fds[nfds++], PERF_EVENT_IOC_SET_OUTPUT, fds[0])) {
			err = -errno;
			goto out;
		}
	}
	for (int i = 0; i < nfds; i++)
		if (ioctl(fds[i], PERF_EVENT_IOC_ENABLE, 0))
			err = -errno;
	if (err || write(go[1], "g", 1) != 1) {
		err = err ?: -errno;
		goto out;
	}
	for (;;) {
		pid_t w;

		dc_rings_poll_drain(rings, nrings, log, 20);
		w = waitpid(pid, &st, WUNTRACED | WNOHANG);
		if (w == pid && WIFSTOPPED(st))
			break;
		if (w == pid) {
			ksft_print_msg("child died instead of stopping: status %#x\n", st);
			err = -ECHILD;
			break;
		}
		if (time(NULL) - start > CHILD_TIMEOUT_S) {
			ksft_print_msg("child did not stop within %d s\n", CHILD_TIMEOUT_S);
			err = -ETIMEDOUT;
			break;
		}
	}
	for (int i = 0; i < nfds; i++)
		ioctl(fds[i], PERF_EVENT_IOC_DISABLE, 0);
	dc_rings_poll_drain(rings, nrings, log, 0);
out:
	for (int i = nrings; i < nfds; i++)
		close(fds[i]);
	dc_rings_close(rings, nrings);
	close(go[1]);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return err ? err : pid;
}

static bool is_user_addr(uint64_t a)
{
	return a < DC_USER_MAX;
}

static void tp_attr(struct perf_event_attr *attr, long id, bool defer_output)
{
	dc_attr_init(attr, 1, defer_output);
	attr->type = PERF_TYPE_TRACEPOINT;
	attr->config = id;
}

/* The exact user stack of every record of the children's calls. */
static const char *const wait_chain[] = {
	"uring_leaf", "wait_entries", "profile", "in_entry_task_work",
	"main", "__libc_start_call_main",
};
static const char *const read_chain[] = {
	"uring_leaf", "read_entries", "profile", "workers",
	"main", "__libc_start_call_main",
};

/* Records at uring_leaf's frameless entry or exit (record_exact()). */
static size_t frameless_records;

/*
 * @d is exactly @chain; or, taken at the frameless entry or exit of
 * @chain's leaf (an interrupt there: a frame-pointer walk then skips the
 * leaf's caller, dc_check_leaf_record()), @chain without its caller,
 * counted in frameless_records.
 */
static bool record_exact(const struct dc_deferred *d, const char *const *chain,
			 int nchain, const char *what)
{
	bool frameless;
	int where;

	if (dc_check_leaf_record(d, chain[0], chain, nchain, &frameless) == 1) {
		frameless_records += frameless;
		return true;
	}
	if (dc_stack_is(d->ips, d->nr, chain, nchain, &where))
		return true;
	ksft_print_msg("%s: record tid %u cookie %#llx: wrong stack at frame %d (want %s):\n",
		       what, d->tid, (unsigned long long)d->cookie, where,
		       where < nchain ? chain[where] : "the end");
	dc_print_merged(NULL, d);
	return false;
}

static void in_entry_task_work(void)
{
	size_t submits = 0, waits = 0, other = 0, bad = 0, entries = 0;
	size_t waited = 0, not_waited = 0, after = 0;
	struct perf_event_attr attr[2];
	struct dc_log log = { 0 };
	long submit_id, wait_id;
	pid_t pid;

	submit_id = dc_tp_id("io_uring", "io_uring_submit_req");
	wait_id = dc_tp_id("io_uring", "io_uring_cqring_wait");
	if (submit_id < 0 || wait_id < 0) {
		ksft_test_result_fail("no io_uring tracepoints (tracefs, CONFIG_IO_URING, CONFIG_TRACEPOINTS)\n");
		return;
	}
	tp_attr(&attr[0], submit_id, true);
	tp_attr(&attr[1], wait_id, false);
	pid = profile(wait_entries, NULL, attr, 2, false, &log);
	if (pid < 0) {
		ksft_test_result_fail("profiling the io_uring waits: %s\n", strerror(-pid));
		return;
	}

	for (size_t i = 0; i < log.nr_samples; i++) {
		const struct dc_sample *s = &log.samples[i];

		if (dc_kernel_stack_has(s, "io_submit_sqes"))
			submits++;
		else if (dc_kernel_stack_has(s, "io_cqring_wait"))
			waits++;
		else
			other++;
	}

	/*
	 * Each entry is the cookie of a submit sample met first: its two
	 * submit samples, its record, then perhaps its wait sample, in ring
	 * order (dc_log's seq), and nothing else with that cookie.
	 */
	for (size_t i = 0; i < log.nr_samples; i++) {
		const struct dc_sample *s = &log.samples[i], *w = NULL;
		const struct dc_deferred *d;
		size_t nsub = 0, nwait = 0, first_seen = 1;
		uint64_t last_sub = 0;
		long idx, n;

		if (!s->cookie || !dc_kernel_stack_has(s, "io_submit_sqes"))
			continue;
		for (size_t j = 0; j < i; j++)
			if (log.samples[j].cookie == s->cookie)
				first_seen = 0;
		if (!first_seen)
			continue;
		entries++;
		for (size_t j = 0; j < log.nr_samples; j++) {
			const struct dc_sample *t = &log.samples[j];

			if (t->cookie != s->cookie)
				continue;
			if (dc_kernel_stack_has(t, "io_submit_sqes")) {
				nsub++;
				if (t->seq > last_sub)
					last_sub = t->seq;
			} else if (dc_kernel_stack_has(t, "io_cqring_wait")) {
				nwait++;
				w = t;
			} else {
				nwait += 100;	/* a sample of no kind: wrong */
			}
		}
		idx = dc_find_deferred(&log, s->pid, s->tid, s->cookie, &n);
		d = idx >= 0 ? &log.deferred[idx] : NULL;
		if (nsub != 2 || nwait > 1 || n != 1 || d->seq < last_sub ||
		    (w && w->seq < d->seq) ||
		    !record_exact(d, wait_chain, ARRAY_SIZE(wait_chain), "wait")) {
			if (bad++ < 3)
				ksft_print_msg("entry with cookie %#llx (tid %u): %zu submit samples (2 wanted), %zu wait samples (at most 1), %ld records (1), record %s the submit samples, %s\n",
					       (unsigned long long)s->cookie, s->tid,
					       nsub, nwait, n,
					       d && d->seq > last_sub ? "after" : "not after",
					       !w ? "no wait sample" :
					       d && w->seq > d->seq ? "wait sample after the record" :
					       "wait sample before the record");
			continue;
		}
		if (!w) {
			not_waited++;
			continue;
		}
		waited++;
		after++;
		if (after <= 2) {
			ksft_print_msg("limit: sample after its record: tid %u cookie %#llx, io_cqring_wait() on its kernel stack, the record (%u frames) written before it by the task_work io_cqring_wait() ran:\n",
				       w->tid, (unsigned long long)w->cookie, d->nr);
			dc_print_merged(w, d);
		}
	}
	ksft_print_msg("io_uring waits: %zu samples (%zu submit, %zu wait, %zu other), %zu records, %zu entries: %zu waited (a sample after its record), %zu did not wait (timeout done first), %zu wrong; lost %llu\n",
		       log.nr_samples, submits, waits, other, log.nr_deferred,
		       entries, waited, not_waited, bad,
		       (unsigned long long)log.lost);
	ksft_print_msg("samples after the one record of their entry (task_work run inside io_uring_enter(); perf 7.3 shows them without user stack): %zu\n",
		       after);
	ksft_test_result(entries == NR_WAITS && !bad && !other && !log.lost &&
			 waited >= NR_WAITS / 2 && log.nr_deferred == entries,
			 "%d io_uring_enter() calls: each entry's two submit samples precede its one record (the whole stack of the call), and the wait sample of each of the %zu entries that waited follows it (the task_work ran inside io_cqring_wait()); no other record\n",
			 NR_WAITS, waited);
	dc_log_free(&log);
}

struct thread_check {
	size_t samples, cookies, matched, after, after_tw, after_cut, stop, bad;
	size_t worker, sqthread, starting, worker_bad;
	size_t records_of_workers, records_bad;
};

/*
 * Is @s, with record @d of its entry, a sample of an io_uring_enter() call?
 * By its kernel frames (the syscall's wrappers or io_cqring_wait(); a
 * sample in a frameless leaf skips its caller, so any one will do), or,
 * in the call's exit work (a leaf right under the syscall entry), by the
 * record: its first frame is uring_leaf's syscall, the only system call
 * uring_leaf makes.
 */
static bool in_io_uring_enter(const struct dc_sample *s, const struct dc_deferred *d)
{
	return dc_kernel_stack_has(s, "__x64_sys_io_uring_enter") ||
	       dc_kernel_stack_has(s, "__se_sys_io_uring_enter") ||
	       dc_kernel_stack_has(s, "__do_sys_io_uring_enter") ||
	       dc_kernel_stack_has(s, "io_cqring_wait") ||
	       (d->nr && dc_sym_is(d->ips[0], "uring_leaf") &&
		dc_kernel_stack_has(s, "entry_SYSCALL_64_after_hwframe"));
}

/*
 * Is @s, a sample whose entry's record was written before it, on the way
 * back to user space after that task_work?  In the task_work
 * (task_work_run(): a sample interrupting the record's output comes after
 * it, whose time was taken first) or in what calls it on the way out
 * (resume_user_mode_work(), exit_to_user_mode_loop() after a system call;
 * the sample's first frame in do_syscall_64(), where that loop is
 * inlined); anywhere under irqentry_exit() of an interrupt or exception
 * taken in user mode (its kernel stack ends at the asm_ entry: an entry
 * from kernel mode would go on into the interrupted code), which on that
 * path is the way out, its exit-to-user loop inlined (a frameless leaf
 * such as schedule()'s sched_update_worker() hides the frames in between);
 * or the signal path (get_signal() runs the task_work first).
 */
static bool exit_path_after_task_work(const struct dc_sample *s)
{
	static const char *const out[] = {
		"task_work_run", "resume_user_mode_work", "exit_to_user_mode_loop",
	};
	const char *first, *last;

	if (!s->nr_kernel)
		return false;
	first = dc_ksym(s->kernel[0]);
	last = dc_ksym(s->kernel[s->nr_kernel - 1]);
	for (size_t i = 0; i < ARRAY_SIZE(out); i++)
		if (dc_kernel_stack_has(s, out[i]))
			return true;
	return !strcmp(first, "do_syscall_64") ||
	       (dc_kernel_stack_has(s, "irqentry_exit") && !strncmp(last, "asm_", 4)) ||
	       dc_in_signal_path(s);
}

/*
 * Is @s's kernel stack cut short by the kernel's unwinder at a retpoline
 * thunk?  An ORC kernel marks __x86_indirect_thunk_* UNWIND_HINT_UNDEFINED:
 * a sample taken in one has no caller, and a stack through one ends there.
 * The frame-pointer kernels of make check never cut a stack so.
 */
static bool cut_at_thunk(const struct dc_sample *s)
{
	return s->nr_kernel &&
	       !strncmp(dc_ksym(s->kernel[s->nr_kernel - 1]), "__x86_indirect_thunk_", 21);
}

/*
 * The time of the first sample of (@tid, @cookie) in @log: the entry's
 * first request was made then or before.
 */
static uint64_t first_sample_time(const struct dc_log *log, uint32_t tid, uint64_t cookie)
{
	uint64_t t = UINT64_MAX;

	for (size_t i = 0; i < log->nr_samples; i++) {
		const struct dc_sample *x = &log->samples[i];

		if (x->tid == tid && x->cookie == cookie && x->time < t)
			t = x->time;
	}
	return t;
}

/* Tests 2-4 on one run's log; @pid is the child's. */
static void check_threads(const struct dc_log *log, pid_t pid, struct thread_check *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < log->nr_samples; i++) {
		const struct dc_sample *s = &log->samples[i];
		long idx, n;

		if (s->pid != (uint32_t)pid)
			continue;
		if (s->tid != (uint32_t)pid) {
			/*
			 * The child has no thread of its own: any other tid is
			 * a user worker io_uring made for it (io-wq's or the
			 * SQPOLL thread), at work (io_wq_worker() or
			 * io_sq_thread() on its stack) or starting.
			 */
			bool wrk = dc_kernel_stack_has(s, "io_wq_worker");
			bool sqt = dc_kernel_stack_has(s, "io_sq_thread");

			c->worker += wrk;
			c->sqthread += sqt && !wrk;
			c->starting += !wrk && !sqt;
			if (s->has_user_ctx || s->ends_deferred || s->cookie ||
			    !s->nr_kernel || is_user_addr(s->ip)) {
				if (c->worker_bad++ < 3) {
					ksft_print_msg("sample %zu of user worker tid %u: a user ip, callchain or cookie:\n",
						       i, s->tid);
					dc_print_merged(s, NULL);
				}
			}
			continue;
		}
		c->samples++;
		if (!s->cookie || !s->ends_deferred) {
			if (c->bad++ < 3) {
				ksft_print_msg("sample %zu of the submitter has no cookie:\n", i);
				dc_print_merged(s, NULL);
			}
			continue;
		}
		c->cookies++;
		idx = dc_find_deferred((struct dc_log *)log, s->pid, s->tid, s->cookie, &n);
		/*
		 * The last entry ends in the final stop: a sample taken there
		 * after its task_work ran has its record, if any, before it,
		 * and one whose request came after it has none (due at the
		 * next return to user space; the child is killed first).
		 */
		if (n <= 1 && dc_in_final_stop(log, s) &&
		    (n == 0 || log->deferred[idx].time < s->time)) {
			c->stop++;
			continue;
		}
		if (n != 1) {
			if (c->bad++ < 3) {
				ksft_print_msg("sample %zu of the submitter: cookie %#llx has %ld records\n",
					       i, (unsigned long long)s->cookie, n);
				dc_print_merged(s, NULL);
			}
			continue;
		}
		/* By time: the record and the sample may be in two rings. */
		if (log->deferred[idx].time > s->time) {
			c->matched++;
			continue;
		}
		/*
		 * The record came first: the entry's task_work ran before this
		 * sample.  Allowed only with the evidence of where on the
		 * sample's kernel stack: inside io_uring_enter(), whose
		 * io_cqring_wait() runs the task_work (test 1); or on the way
		 * out, in or after the task_work that wrote the record
		 * (exit_path_after_task_work()).
		 */
		if (in_io_uring_enter(s, &log->deferred[idx])) {
			if (c->after++ < 2) {
				ksft_print_msg("limit: sample after its record (tid %u cookie %#llx), inside io_uring_enter():\n",
					       s->tid, (unsigned long long)s->cookie);
				dc_print_merged(s, &log->deferred[idx]);
			}
			continue;
		}
		if (exit_path_after_task_work(s)) {
			if (c->after_tw++ < 2) {
				ksft_print_msg("limit: sample after its record (tid %u cookie %#llx), on the way out after the task_work wrote it:\n",
					       s->tid, (unsigned long long)s->cookie);
				dc_print_merged(s, &log->deferred[idx]);
			}
			continue;
		}
		/*
		 * A stack the kernel's unwinder cut at a retpoline thunk (an
		 * ORC kernel: make check-full's rust-defconfig) cannot show
		 * where the sample is.  Its times can show the limit itself:
		 * the record was written after an earlier sample of the entry
		 * (its first request, or one after it), so in this entry,
		 * before this sample.
		 */
		if (cut_at_thunk(s) &&
		    first_sample_time(log, s->tid, s->cookie) < log->deferred[idx].time) {
			if (c->after_cut++ < 2) {
				ksft_print_msg("limit: sample after its record (tid %u cookie %#llx), its kernel stack cut at a retpoline thunk; the record written after the entry's first sample:\n",
					       s->tid, (unsigned long long)s->cookie);
				dc_print_merged(s, &log->deferred[idx]);
			}
			continue;
		}
		if (c->bad++ < 3) {
			ksft_print_msg("sample %zu of the submitter (cookie %#llx) follows its record, neither inside io_uring_enter() nor on the way out:\n",
				       i, (unsigned long long)s->cookie);
			dc_print_merged(s, &log->deferred[idx]);
		}
	}
	for (size_t i = 0; i < log->nr_deferred; i++) {
		const struct dc_deferred *d = &log->deferred[i];
		bool sampled = false;

		if (d->tid != (uint32_t)pid) {
			c->records_of_workers++;
			continue;
		}
		for (size_t j = 0; j < log->nr_samples && !sampled; j++)
			sampled = log->samples[j].cookie == d->cookie &&
				  log->samples[j].tid == d->tid;
		/* The calls' records are exact; the child's start is libc's. */
		if (!sampled || (d->nr && d->ips[0] >= DC_USER_MAX) ||
		    (dc_sym_is(d->ips[0], "uring_leaf") &&
		     !record_exact(d, read_chain, ARRAY_SIZE(read_chain), "reads")))
			c->records_bad++;
	}
}

static void workers(bool sqpoll)
{
	const char *what = sqpoll ? "SQPOLL ring" : "io-wq (IOSQE_ASYNC)";
	struct perf_event_attr attr;
	struct dc_log log = { 0 };
	struct thread_check c;
	size_t kind;
	pid_t pid;

	dc_attr_init(&attr, 100000, true);	/* 10 kHz */
	attr.inherit = 1;
	/* One clock for the rings of all CPUs: a record and its samples. */
	attr.use_clockid = 1;
	attr.clockid = CLOCK_MONOTONIC;
	pid = profile(read_entries, sqpoll ? (void *)1 : NULL, &attr, 1, true, &log);
	if (pid < 0) {
		ksft_test_result_fail("%s: profiling: %s\n", what, strerror(-pid));
		if (!sqpoll)
			ksft_test_result_fail("%s: profiling: %s\n", what, strerror(-pid));
		return;
	}
	check_threads(&log, pid, &c);
	kind = sqpoll ? c.sqthread : c.worker;
	ksft_print_msg("%s: %zu samples of the submitter (%zu with a cookie: %zu before their record, after it %zu inside io_uring_enter(), %zu on the way out after the task_work and %zu with a kernel stack cut at a retpoline thunk, %zu in the final stop after its task_work; %zu wrong)\n",
		       what, c.samples, c.cookies, c.matched, c.after, c.after_tw,
		       c.after_cut, c.stop, c.bad);
	ksft_print_msg("%s: %zu samples of user workers (%zu in io_wq_worker, %zu in io_sq_thread, %zu starting; %zu wrong), %zu records (%zu wrong, %zu of another tid; %zu of the tests' so far at uring_leaf's frameless entry or exit, without its caller), lost %llu\n",
		       what, c.worker + c.sqthread + c.starting, c.worker,
		       c.sqthread, c.starting, c.worker_bad, log.nr_deferred,
		       c.records_bad, c.records_of_workers, frameless_records,
		       (unsigned long long)log.lost);
	ksft_print_msg("%s: samples of the submitter after their entry's one record (perf 7.3 shows them without user stack): %zu of %zu\n",
		       what, c.after + c.after_tw + c.after_cut, c.samples);
	if (!sqpoll)
		ksft_test_result(c.samples && !c.bad && !c.records_bad && !log.lost &&
				 c.matched + c.after + c.after_tw + c.after_cut + c.stop == c.cookies,
				 "%s: the submitter's %zu samples each have a cookie and one record, after the sample or, only with the evidence on its kernel stack, before it (%zu inside io_uring_enter(), %zu on the way out after the task_work, %zu cut at a thunk and after an earlier sample of the entry)\n",
				 what, c.samples, c.after, c.after_tw, c.after_cut);
	ksft_test_result(kind >= MIN_WORKER_SAMPLES && !c.worker_bad &&
			 !c.records_of_workers &&
			 (!sqpoll || (c.samples && !c.bad && !c.records_bad && !log.lost &&
				      c.matched + c.after + c.after_tw + c.after_cut + c.stop == c.cookies)),
			 "%s: %zu samples of user workers (%zu in %s; %d wanted) have no user callchain and no cookie, and no record has their tid%s\n",
			 what, c.worker + c.sqthread + c.starting, kind,
			 sqpoll ? "io_sq_thread" : "io_wq_worker", MIN_WORKER_SAMPLES,
			 sqpoll ? "; the waiting thread's samples as in test 2" : "");
	dc_log_free(&log);
}

int main(void)
{
	struct uring probe;
	int err;

	ksft_print_header();
	ksft_set_plan(4);
	if (dc_syms_load())
		ksft_exit_fail_msg("cannot read own symbol table\n");
	dc_kallsyms_load();
	err = uring_init(&probe, 2, 0);
	if (err)
		ksft_exit_fail_msg("io_uring_setup: %s (the test kernels have CONFIG_IO_URING)\n",
				   strerror(-err));
	close(probe.fd);
	in_entry_task_work();
	workers(false);
	workers(true);
	dc_finished();
}
