// SPDX-License-Identifier: GPL-2.0
/*
 * Deferred callchains around exit, exec and fork, on per-task events.
 *
 * 1. Exit with a deferred unwind pending: a task dumps core (SIGQUIT sent
 *    to itself).  The dump is one long stretch of kernel work that ends in
 *    do_exit() without returning to user space, so the unwind requested by
 *    its samples can only run in the exit path.  Every sample of the dump
 *    carries one cookie, and its PERF_RECORD_CALLCHAIN_DEFERRED must still
 *    reach the per-task event, with the user stack of the kill() call.
 *    Upstream 7.3 loses it: do_exit() detaches the task's perf events
 *    (perf_event_exit_task()) before it runs the pending unwind
 *    (unwind_deferred_task_exit()).  This test fails there.
 * 2. SIGKILL during a long system call: the pending unwind runs when the
 *    task handles the signal, before it exits; every cookie has its record.
 * 3. exec: a task execs itself 20 times in a chain.  A sample taken inside
 *    execve() is deferred like any other; its record is written when the
 *    task first returns to user space, which after a successful exec is
 *    in the new program, so the record holds the new image's user stack:
 *    its entry point _start alone (ELF_PLAT_INIT zeroes the frame pointer).
 *    This is the documented outcome (upstream's too): nothing dangles.
 * 4. fork, with an inherited event: a task forks 8 children that make long
 *    system calls.  Every sample of parent and children has its record with
 *    its own pid/tid, cookies never cross tasks, and samples of fork()
 *    itself get the stack of the fork() call.
 *
 * User stacks are compared whole, with their length: from the leaf to
 * main <- __libc_start_call_main, where the walk ends (DC_MAIN_FRAMES).
 *
 * Samples taken after a task began exiting carry no cookie (the request is
 * refused once PF_EXITING is set; perf records the user stack in place);
 * tests 2-4 count those separately and test 1 is the one about exit.
 *
 * Every task of 2-4 dies of SIGKILL (in its read, or stopped), and
 * upstream C loses the record of its last entry if that entry's unwind is
 * still pending at do_exit() (1's bug).  There a sample without a
 * record is excused only if its entry is the one the task's SIGKILL was
 * traced in: signal/signal_deliver filtered to sig == 9, one CPU-wide
 * event per CPU open through 2-4 (dc_tp_rings_open()), traces it in
 * the task, in get_signal()'s group-exit branch before do_group_exit(),
 * before PF_EXITING, and its sample (defer_callchain) carries the
 * entry's cookie.  Its losses fail the test that read them.
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
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest.h"
#include "dc_util.h"

#define PERIOD_NS	100000		/* 10 kHz */
#define RING_PAGES	512
#define READ_SIZE	(16 << 20)
#define DUMP_SIZE	(48 << 20)
#define NR_EXECS	20
#define NR_FORKS	8
/*
 * The period once the dump is near: about 1/30 of the time the machine
 * takes to write DUMP_SIZE bytes to /tmp (measured first, dump_period()),
 * so the dump gets a few dozen samples however fast the machine is,
 * between 1 and 10 ms, so that a sample before the dump (a few
 * microseconds between kill() and get_signal()) stays rare.
 */
#define DUMP_PERIOD_MIN_NS	1000000
#define DUMP_PERIOD_MAX_NS	10000000
static uint64_t dump_period_ns = DUMP_PERIOD_MAX_NS;
/* Lowest kernel address on x86_64. */
#define DC_KERNEL_MIN	0xffff800000000000ULL

/* ---- the child programs; each leaf makes its system call itself ---- */
/* Each leaf sets its frame up first: see DC_KEEP_FRAME(). */

__attribute__((noinline)) void exit_leaf(long pid)
{
	DC_KEEP_FRAME();
	dc_syscall3(__NR_kill, pid, SIGQUIT, 0);
	asm volatile("" ::: "memory");
}

/*
 * The core dump's kernel entry must not be sampled before get_signal()
 * has run the task's pending task_work (it does so before it dumps core):
 * a sample there would have its unwind run, and its record written, before
 * the dump, and every sample of the dump would share that cookie and
 * record.  So the child says when it is about to kill itself, the test then
 * restarts the event's timer with a long period (PERF_EVENT_IOC_PERIOD),
 * and only then lets it go: the first sample of the entry falls in the dump.
 */
struct handshake {
	int ready, go;
};

__attribute__((noinline)) void dump_child(void *arg)
{
	struct rlimit unlimited = { RLIM_INFINITY, RLIM_INFINITY };
	volatile struct handshake *h = arg;
	char *mem;

	if (setrlimit(RLIMIT_CORE, &unlimited) || chdir("/tmp"))
		_exit(3);
	/* Touched memory makes the dump long. */
	mem = mmap(NULL, DUMP_SIZE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		_exit(3);
	for (size_t i = 0; i < DUMP_SIZE; i += 4096)
		mem[i] = (char)i | 1;
	h->ready = 1;
	while (!h->go)
		;
	exit_leaf(getpid());
	_exit(4);	/* not reached: SIGQUIT dumps core */
}

__attribute__((noinline)) void read_leaf(int fd, char *buf, int n)
{
	DC_KEEP_FRAME();
	for (int i = 0; i < n; i++)
		if (dc_syscall3(__NR_read, fd, (long)buf, READ_SIZE) != READ_SIZE)
			_exit(4);
	asm volatile("" ::: "memory");
}

static char *read_buf(void)
{
	char *b = mmap(NULL, READ_SIZE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	return b == MAP_FAILED ? NULL : b;
}

__attribute__((noinline)) void kill_child(void *arg)
{
	int fd = open("/dev/zero", O_RDONLY);
	char *buf = read_buf();

	(void)arg;
	if (fd < 0 || !buf)
		_exit(3);
	read_leaf(fd, buf, 1 << 20);	/* until killed */
	_exit(4);
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
	char *argv[] = { "deferred_exit", "--exec-chain", n, NULL };

	if (left <= 0) {
		raise(SIGSTOP);	/* end of the chain: the harness reaps it */
		_exit(0);
	}
	snprintf(n, sizeof(n), "%d", left - 1);
	exec_leaf("/proc/self/exe", argv);
}

__attribute__((noinline)) void exec_child(void *arg)
{
	(void)arg;
	exec_next(NR_EXECS);
}

__attribute__((noinline)) long fork_leaf(void)
{
	DC_KEEP_FRAME();
	return dc_syscall3(__NR_fork, 0, 0, 0);
}

__attribute__((noinline)) void fork_parent(void *arg)
{
	int fd = open("/dev/zero", O_RDONLY);
	char *buf = read_buf();
	char *mem;

	(void)arg;
	/* Touched memory makes fork() copy more. */
	mem = mmap(NULL, DUMP_SIZE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (fd < 0 || !buf || mem == MAP_FAILED)
		_exit(3);
	for (int i = 0; i < NR_FORKS; i++) {
		long pid = fork_leaf();

		if (pid == 0) {
			read_leaf(fd, buf, 2);
			raise(SIGSTOP);	/* parent reaps it */
			_exit(0);
		}
		if (pid < 0)
			_exit(3);
	}
	for (int i = 0; i < NR_FORKS; i++) {
		int st;
		pid_t w = waitpid(-1, &st, WUNTRACED);

		if (w < 0 || !WIFSTOPPED(st))
			_exit(3);
		kill(w, SIGKILL);
		waitpid(w, &st, 0);
	}
}

/* ---- the harness ---- */

#define MAX_CPUS	8

static size_t samples_in(struct dc_log *log, const char *fn)
{
	size_t n = 0;

	for (size_t i = 0; i < log->nr_samples; i++)
		n += dc_kernel_stack_has(&log->samples[i], fn);
	return n;
}

/*
 * Run @fn(@arg) in a child under a per-task event with @attr, collecting
 * records into @log until the child exits or stops itself; with
 * @kill_after, SIGKILL it once that many samples inside read() arrived;
 * with @h, do dump_child()'s handshake.
 * A stopped child is killed and reaped after the rings were drained.  An
 * inherited event cannot be mmap'ed per task, so with @attr->inherit
 * there is one per CPU (as perf record opens them).  The child waits for
 * the events spinning on shared memory, not in a system call, so that its
 * only kernel entries under the event are its work's.  Returns the
 * child's pid and its wait status in *@status, or -errno.
 */
/*
 * profile() and the test functions are kept out of line: they are frames
 * of the exact user stacks checked (fn <- profile <- test <- main <-
 * __libc_start_call_main, see DC_MAIN_FRAMES).
 */
static __attribute__((noinline))
pid_t profile(void (*fn)(void *), void *arg, struct perf_event_attr *attr,
		     struct dc_log *log, size_t kill_after, int *status,
		     volatile struct handshake *h)
{
	int ncpus = attr->inherit ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
	struct dc_ring ring[MAX_CPUS];
	int fd[MAX_CPUS], nfd = 0, err = 0;
	volatile int *go;
	bool killed = false;
	pid_t pid;

	if (ncpus < 1 || ncpus > MAX_CPUS)
		return -EINVAL;
	go = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (go == MAP_FAILED)
		return -errno;
	*go = 0;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		while (!*go)
			;
		fn(arg);
		asm volatile("" ::: "memory");
		raise(SIGSTOP);
		_exit(0);
	}
	for (nfd = 0; nfd < ncpus; nfd++) {
		fd[nfd] = dc_open(attr, pid, attr->inherit ? nfd : -1, -1, 0);
		if (fd[nfd] < 0 || dc_ring_map(&ring[nfd], fd[nfd], RING_PAGES, nfd)) {
			err = -errno;
			if (fd[nfd] >= 0)
				close(fd[nfd]);
			break;
		}
	}
	for (int i = 0; i < nfd && !err; i++)
		if (ioctl(fd[i], PERF_EVENT_IOC_ENABLE, 0))
			err = -errno;
	if (err) {
		kill(pid, SIGKILL);
		waitpid(pid, status, 0);
		goto out;
	}
	*go = 1;
	for (;;) {
		struct pollfd p[MAX_CPUS];
		pid_t w;

		for (int i = 0; i < nfd; i++)
			p[i] = (struct pollfd){ .fd = fd[i], .events = POLLIN };
		poll(p, nfd, 20);
		for (int i = 0; i < nfd; i++)
			dc_ring_drain(&ring[i], log);
		if (h && h->ready && !h->go) {
			uint64_t period = dump_period_ns;

			if (ioctl(fd[0], PERF_EVENT_IOC_PERIOD, &period))
				ksft_print_msg("PERF_EVENT_IOC_PERIOD: %s\n", strerror(errno));
			h->go = 1;
		}
		if (kill_after && !killed && samples_in(log, "ksys_read") >= kill_after) {
			kill(pid, SIGKILL);
			killed = true;
		}
		w = waitpid(pid, status, WUNTRACED | WNOHANG);
		if (w == pid && WIFSTOPPED(*status)) {
			for (int i = 0; i < nfd; i++)
				dc_ring_drain(&ring[i], log);
			kill(pid, SIGKILL);
			waitpid(pid, status, 0);
			break;
		}
		if (w == pid)
			break;
	}
out:
	/* The task is gone: whatever its exit wrote is in the rings now. */
	for (int i = 0; i < nfd; i++) {
		dc_ring_drain(&ring[i], log);
		dc_ring_unmap(&ring[i]);
		close(fd[i]);
	}
	munmap((void *)go, 4096);
	return err ? err : pid;
}

/* The cookie of @tid's last sample that has one. */
static uint64_t last_cookie(const struct dc_log *log, uint32_t tid)
{
	uint64_t time = 0, cookie = 0;

	for (size_t i = 0; i < log->nr_samples; i++) {
		const struct dc_sample *s = &log->samples[i];

		if (s->tid == tid && s->cookie && s->time >= time) {
			time = s->time;
			cookie = s->cookie;
		}
	}
	return cookie;
}

/* Is this the upstream C kernel (the guest's variant=c or c-debug)? */
static bool c_kernel(void)
{
	return !strcmp(dc_variant(), "c");
}

/* The SIGKILL tracepoint (see the top): its rings, its samples. */
#define KILL_TP_PAGES	16
static struct dc_ring kill_r[MAX_CPUS];
static int kill_cpus[MAX_CPUS], nr_kill_cpus;
static struct dc_tp_hits kills;

static void open_kill_rings(void)
{
	int err;

	nr_kill_cpus = dc_online_cpus(kill_cpus, MAX_CPUS);
	if (nr_kill_cpus < 1)
		ksft_exit_fail_msg("no online CPUs\n");
	err = dc_tp_rings_open(kill_r, kill_cpus, nr_kill_cpus, "signal", "signal_deliver",
			       "sig == 9", KILL_TP_PAGES, 0);
	if (err)
		ksft_exit_fail_msg("the SIGKILL tracepoint: %s\n", strerror(-err));
	if (dc_rings_ioctl(kill_r, nr_kill_cpus, PERF_EVENT_IOC_ENABLE))
		ksft_exit_fail_msg("enable: %s\n", strerror(errno));
}

static void close_kill_rings(void)
{
	dc_rings_close(kill_r, nr_kill_cpus);
	dc_tp_free(&kills);
}

/*
 * The common checks, after the log's tasks were reaped: every sample with
 * a cookie has exactly one record of its own pid/tid, except, counted in
 * *excused, a sample without a record:
 *   - on upstream C only, in the signal or exit path of the entry its
 *     task's SIGKILL was traced in (the same pid, tid and cookie as a
 *     signal_deliver sample, see the top): the task's events are detached
 *     before its pending unwind runs (docs/deviations.md); the Rust
 *     kernel has no such excuse.  Every task here is killed with its
 *     event enabled, also a stopped one: on C this covers a sample taken
 *     on the way into the final SIGSTOP after the entry's task_work ran,
 *     whose record was due at the next return to user space;
 *   - otherwise the final stop, on both kernels: a sample of its task's
 *     last entry (its latest cookie), in the signal path and not the exit
 *     path (the rule as it was; on Rust the record is written at the exit
 *     the SIGKILL causes, so the runs excuse none there).
 * Samples without a cookie are all in the exit path (counted in *exiting:
 * a request of an exiting task is refused); no record is orphaned (but a
 * record of an entry the SIGKILL was traced in, which the tracepoint's own
 * request may have brought about: counted apart) or duplicated; the
 * tracepoint lost nothing.  Returns the number of violations and prints
 * the first.
 */
static size_t check_cookies(struct dc_log *log, size_t *matched, size_t *exiting,
			    size_t *excused)
{
	size_t bad = 0, in_kill = 0, tp_only = 0, traced = 0, traced_rec = 0;
	uint64_t tp_lost = kills.log.lost, tp_lost_rec = kills.log.lost_records;
	uint64_t tp_malformed = kills.log.malformed, tp_records = kills.records;

	*matched = *exiting = *excused = 0;
	/*
	 * The tasks are gone: their signal_deliver samples were written, and
	 * so were the drops no PERF_RECORD_LOST reported yet.
	 */
	dc_tp_collect(kill_r, nr_kill_cpus, &kills);
	for (int i = 0; i < nr_kill_cpus; i++) {
		long long v = dc_ring_read_lost(&kill_r[i], &kills.log);

		if (v < 0 && bad++ < 3)
			ksft_print_msg("the SIGKILL tracepoint's lost count: %s\n",
				       strerror((int)-v));
	}
	for (size_t i = 0; i < kills.nr; i++) {
		const struct dc_tp_hit *x = &kills.v[i];
		long n = 0;
		bool ours = false;

		for (size_t j = 0; j < log->nr_samples && !ours; j++)
			ours = log->samples[j].pid == x->pid;
		for (size_t j = 0; j < log->nr_deferred && !ours; j++)
			ours = log->deferred[j].pid == x->pid;
		if (!ours || !x->cookie)
			continue;
		traced++;
		dc_find_deferred(log, x->pid, x->tid, x->cookie, &n);
		traced_rec += n == 1;
	}
	for (size_t i = 0; i < log->nr_samples; i++) {
		struct dc_sample *s = &log->samples[i];
		long idx, n;

		if (!s->cookie) {
			if (dc_in_exit_path(s)) {
				(*exiting)++;
				continue;
			}
			if (bad++ < 3) {
				ksft_print_msg("sample %zu (tid %u) has no cookie, not exiting\n",
					       i + 1, s->tid);
				dc_print_merged(s, NULL);
			}
			continue;
		}
		idx = dc_find_deferred(log, s->pid, s->tid, s->cookie, &n);
		if (n == 1) {
			log->deferred[idx].matched++;
			(*matched)++;
			continue;
		}
		if (n == 0 && c_kernel() && (dc_in_exit_path(s) || dc_in_signal_path(s)) &&
		    dc_tp_find(&kills, s->pid, s->tid, s->cookie)) {
			if (in_kill++ < 3) {
				ksft_print_msg("sample %zu (tid %u), excused on upstream C: cookie %#llx is its SIGKILL's (signal_deliver), no record:\n",
					       i + 1, s->tid, (unsigned long long)s->cookie);
				dc_print_merged(s, NULL);
			}
			(*excused)++;
			continue;
		}
		if (n == 0 && s->cookie == last_cookie(log, s->tid) &&
		    dc_in_signal_path(s) && !dc_in_exit_path(s)) {
			(*excused)++;
			continue;
		}
		if (bad++ < 3) {
			ksft_print_msg("sample %zu (tid %u): cookie %#llx has %ld records\n",
				       i + 1, s->tid, (unsigned long long)s->cookie, n);
			dc_print_merged(s, NULL);
		}
	}
	for (size_t i = 0; i < log->nr_deferred; i++) {
		struct dc_deferred *d = &log->deferred[i];

		/* A record whose cookie is also used by another task. */
		for (size_t j = 0; j < log->nr_samples; j++) {
			if (log->samples[j].cookie == d->cookie &&
			    log->samples[j].tid != d->tid) {
				if (bad++ < 3)
					ksft_print_msg("cookie %#llx of tid %u also on a sample of tid %u\n",
						       (unsigned long long)d->cookie,
						       d->tid, log->samples[j].tid);
				break;
			}
		}
		if (!d->matched && dc_tp_find(&kills, d->pid, d->tid, d->cookie))
			tp_only++;
		else if (!d->matched && bad++ < 3)
			ksft_print_msg("record with cookie %#llx (tid %u) has no sample\n",
				       (unsigned long long)d->cookie, d->tid);
		for (uint32_t j = 0; j < d->nr; j++) {
			if (d->ips[j] >= DC_KERNEL_MIN) {
				if (bad++ < 3)
					ksft_print_msg("record with cookie %#llx (tid %u): entry %u of %u is %#llx, a kernel address\n",
						       (unsigned long long)d->cookie, d->tid, j, d->nr,
						       (unsigned long long)d->ips[j]);
				break;
			}
		}
	}
	if (log->lost && bad++ < 3)
		ksft_print_msg("%llu records lost\n", (unsigned long long)log->lost);
	tp_lost = kills.log.lost - tp_lost;
	tp_lost_rec = kills.log.lost_records - tp_lost_rec;
	tp_malformed = kills.log.malformed - tp_malformed;
	tp_records = kills.records - tp_records;
	if ((tp_lost || tp_lost_rec || tp_malformed || tp_records) && bad++ < 3)
		ksft_print_msg("the SIGKILL tracepoint: %llu lost in %llu PERF_RECORD_LOST, %llu malformed, %llu deferred records (none expected)\n",
			       (unsigned long long)tp_lost, (unsigned long long)tp_lost_rec,
			       (unsigned long long)tp_malformed, (unsigned long long)tp_records);
	ksft_print_msg("excused samples without a record: %zu of an entry its SIGKILL was traced in (signal_deliver: upstream exit loss, C only), %zu of the last entry in the signal path only (the final stop); SIGKILLs traced with a cookie: %zu, their entry's record in the event %zu, %zu of those without a sample there\n",
		       in_kill, *excused - in_kill, traced, traced_rec, tp_only);
	return bad;
}

static bool has_any(const struct dc_sample *s, const char *const *names)
{
	for (; *names; names++)
		if (dc_kernel_stack_has(s, *names))
			return true;
	return false;
}

/* Time a DUMP_SIZE write to /tmp and derive the dump's sampling period. */
static void dump_period(void)
{
	struct timespec a, b;
	uint64_t ns;
	char *mem;
	int fd;

	mem = mmap(NULL, DUMP_SIZE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	fd = open("/tmp/dc_dump_probe", O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (mem == MAP_FAILED || fd < 0)
		ksft_exit_fail_msg("dump probe: %s\n", strerror(errno));
	memset(mem, 1, DUMP_SIZE);
	clock_gettime(CLOCK_MONOTONIC, &a);
	if (write(fd, mem, DUMP_SIZE) != DUMP_SIZE)
		ksft_exit_fail_msg("dump probe write: %s\n", strerror(errno));
	clock_gettime(CLOCK_MONOTONIC, &b);
	close(fd);
	unlink("/tmp/dc_dump_probe");
	munmap(mem, DUMP_SIZE);
	ns = (b.tv_sec - a.tv_sec) * 1000000000ULL + b.tv_nsec - a.tv_nsec;
	dump_period_ns = ns / 30;
	if (dump_period_ns < DUMP_PERIOD_MIN_NS)
		dump_period_ns = DUMP_PERIOD_MIN_NS;
	if (dump_period_ns > DUMP_PERIOD_MAX_NS)
		dump_period_ns = DUMP_PERIOD_MAX_NS;
	ksft_print_msg("writing %d MiB to /tmp took %llu us: the dump is sampled every %llu us\n",
		       DUMP_SIZE >> 20, (unsigned long long)ns / 1000,
		       (unsigned long long)dump_period_ns / 1000);
}

/*
 * Attempts of the core dump scenario: an attempt whose entry was sampled
 * before the dump (a sample with the dump's cookie, taken before the
 * first sample in vfs_coredump: the vCPU was preempted between the
 * period's restart and get_signal(), which the handshake cannot rule out
 * under TCG) did not test what tests 1 and 2 test; it is printed, with
 * that sample's kernel stack, and run again.
 */
#define DUMP_ATTEMPTS	3

static __attribute__((noinline)) void exit_with_pending_unwind(void)
{
	static const char *const want[] = {
		"exit_leaf", "dump_child", "profile", "exit_with_pending_unwind",
		DC_MAIN_FRAMES
	};
	size_t dump, same, early, records = 0;
	uint64_t first_dump;
	struct perf_event_attr attr;
	struct dc_log log = { 0 };
	uint64_t cookie;
	long idx = -1, n = 0;
	int st, where = -1, attempt;
	volatile struct handshake *h;
	bool stack_ok = false;
	pid_t pid;

	dc_attr_init(&attr, PERIOD_NS, true);
	h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (h == MAP_FAILED)
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
	dump_period();
	for (attempt = 1; ; attempt++) {
		const struct dc_sample *first_early = NULL;

		dump = same = early = 0;
		first_dump = 0;
		cookie = 0;
		st = 0;
		h->ready = h->go = 0;
		pid = profile(dump_child, (void *)h, &attr, &log, 0, &st, h);
		unlink("/tmp/core");
		if (pid < 0)
			ksft_exit_fail_msg("profiling the core dump: %s\n", strerror(-pid));

		for (size_t i = 0; i < log.nr_samples; i++) {
			struct dc_sample *s = &log.samples[i];

			if (!dc_kernel_stack_has(s, "vfs_coredump"))
				continue;
			if (!dump++)
				cookie = s->cookie;
			same += s->cookie && s->cookie == cookie;
		}
		/*
		 * The entry's first sample must be in the dump (see
		 * dump_child()): none with its cookie before the first one
		 * in vfs_coredump.
		 */
		for (size_t i = 0; cookie && i < log.nr_samples; i++)
			if (log.samples[i].cookie == cookie &&
			    dc_kernel_stack_has(&log.samples[i], "vfs_coredump") &&
			    (!first_dump || log.samples[i].time < first_dump))
				first_dump = log.samples[i].time;
		for (size_t i = 0; cookie && i < log.nr_samples; i++) {
			if (log.samples[i].cookie != cookie ||
			    log.samples[i].time >= first_dump)
				continue;
			if (!early++)
				first_early = &log.samples[i];
		}
		if (!early || attempt == DUMP_ATTEMPTS)
			break;
		ksft_print_msg("core dump, attempt %d of %d: %zu samples with the dump's cookie %#llx before its first in vfs_coredump (%llu ns before it), the first of them:\n",
			       attempt, DUMP_ATTEMPTS, early, (unsigned long long)cookie,
			       (unsigned long long)(first_dump - first_early->time));
		dc_print_merged(first_early, NULL);
		ksft_print_msg("the entry was sampled before get_signal() ran its task_work: the attempt does not test tests 1-2; again\n");
		dc_log_free(&log);
	}
	munmap((void *)h, sizeof(*h));
	if (cookie)
		idx = dc_find_deferred(&log, pid, pid, cookie, &n);
	if (idx >= 0) {
		struct dc_deferred *d = &log.deferred[idx];

		stack_ok = dc_stack_is(d->ips, d->nr, want, ARRAY_SIZE(want), &where);
		for (size_t i = 0; i < log.nr_samples; i++) {
			if (log.samples[i].cookie == cookie) {
				dc_print_merged(&log.samples[i], d);
				break;
			}
		}
	}
	for (size_t i = 0; i < log.nr_deferred; i++)
		records += log.deferred[i].pid == (uint32_t)pid;
	ksft_print_msg("core dump (attempt %d): %zu samples, %zu in vfs_coredump with cookie %#llx (%zu carry it, %zu before the dump), %zu deferred records of the task, %ld for that cookie, lost %llu\n",
		       attempt, log.nr_samples, dump, (unsigned long long)cookie, same, early,
		       records, n, (unsigned long long)log.lost);
	ksft_test_result(WIFSIGNALED(st) && WTERMSIG(st) == SIGQUIT && WCOREDUMP(st) &&
			 dump >= 3 && same == dump && !early,
			 "exit: the task dumped core (status %#x); %zu samples in vfs_coredump (>= 3), all with one cookie, the first of its entry (%zu before, attempt %d of %d)\n",
			 st, dump, early, attempt, DUMP_ATTEMPTS);
	/*
	 * Upstream 7.3's exit order (perf's events detached before the
	 * pending unwind runs): the dump's entry was sampled, and its record
	 * never written (the expected failure of test 2 on the C kernel;
	 * guestlog.py requires this line).
	 */
	if (cookie && dump >= 3 && same == dump && !early && !n)
		ksft_print_msg("upstream bug: exit-loss (cookie %#llx: %zu samples in the dump, no record)\n",
			       (unsigned long long)cookie, dump);
	ksft_test_result(n == 1 && stack_ok,
			 "exit: the dumping task's deferred unwind, pending at exit, still writes its record to the per-task event (%ld records for the cookie), user stack exactly exit_leaf <- dump_child <- profile <- exit_with_pending_unwind <- main <- __libc_start_call_main%s\n",
			 n, idx >= 0 && !stack_ok ? " (wrong stack)" : "");
	dc_log_free(&log);
}

static __attribute__((noinline)) void killed_in_syscall(void)
{
	static const char *const want[] = {
		"read_leaf", "kill_child", "profile", "killed_in_syscall",
		DC_MAIN_FRAMES
	};
	size_t matched, exiting, excused, bad, in_read = 0, stack_bad = 0;
	struct perf_event_attr attr;
	struct dc_log log = { 0 };
	int st = 0, where;
	pid_t pid;

	dc_attr_init(&attr, PERIOD_NS, true);
	pid = profile(kill_child, NULL, &attr, &log, 20, &st, NULL);
	if (pid < 0)
		ksft_exit_fail_msg("profiling the killed task: %s\n", strerror(-pid));
	bad = check_cookies(&log, &matched, &exiting, &excused);
	for (size_t i = 0; i < log.nr_samples; i++) {
		struct dc_sample *s = &log.samples[i];
		long idx, n;

		if (!s->cookie || !dc_kernel_stack_has(s, "ksys_read"))
			continue;
		in_read++;
		idx = dc_find_deferred(&log, s->pid, s->tid, s->cookie, &n);
		if (idx >= 0 && !dc_stack_is(log.deferred[idx].ips,
					     log.deferred[idx].nr, want,
					     ARRAY_SIZE(want), &where) &&
		    !stack_bad++)
			dc_print_merged(s, &log.deferred[idx]);
	}
	ksft_print_msg("SIGKILL: %zu samples, %zu in read, %zu matched, %zu in the exit path without a cookie, %zu of a last entry without a record (excused), %zu deferred records, %zu violations, %zu wrong stacks\n",
		       log.nr_samples, in_read, matched, exiting, excused,
		       log.nr_deferred, bad, stack_bad);
	ksft_test_result(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && in_read >= 10 &&
			 !bad && !stack_bad,
			 "SIGKILL in a long read: %zu samples in read, every cookie has one record of its task (%zu matched, %zu excused), stacks exactly read_leaf <- kill_child <- profile <- killed_in_syscall <- main <- __libc_start_call_main\n",
			 in_read, matched, excused);
	dc_log_free(&log);
}

static void exec_chain(void)
{
	static const char *const execve[] = {
		"__x64_sys_execve", "do_execveat_common", "bprm_execve",
		"load_elf_binary", "begin_new_exec", NULL
	};
	size_t matched, exiting, excused, bad, in_exec = 0, entry_only = 0;
	uint64_t start, start_size;
	struct perf_event_attr attr;
	struct dc_log log = { 0 };
	pid_t pid;
	int st;

	start = dc_sym_addr("_start", &start_size);
	if (!start)
		ksft_exit_fail_msg("no _start symbol\n");
	dc_attr_init(&attr, PERIOD_NS, true);
	pid = profile(exec_child, NULL, &attr, &log, 0, &st, NULL);
	if (pid < 0)
		ksft_exit_fail_msg("profiling the exec chain: %s\n", strerror(-pid));
	bad = check_cookies(&log, &matched, &exiting, &excused);
	for (size_t i = 0; i < log.nr_samples; i++) {
		struct dc_sample *s = &log.samples[i];
		struct dc_deferred *d;
		long idx, n;

		if (!s->cookie || !has_any(s, execve))
			continue;
		in_exec++;
		idx = dc_find_deferred(&log, s->pid, s->tid, s->cookie, &n);
		if (idx < 0)
			continue;	/* counted by check_cookies() */
		d = &log.deferred[idx];
		if (d->nr == 1 && d->ips[0] == start) {
			entry_only++;
		} else if (in_exec - entry_only <= 3) {
			ksft_print_msg("sample in execve with another user stack:\n");
			dc_print_merged(s, d);
		}
	}
	ksft_print_msg("exec: %zu samples, %zu in execve, %zu of them reported with the new image's entry point only, %zu matched, %zu in the exit path without a cookie, %zu of a last entry without a record (excused), %zu deferred records, %zu violations\n",
		       log.nr_samples, in_exec, entry_only, matched, exiting,
		       excused, log.nr_deferred, bad);
	ksft_test_result(in_exec >= 3 && entry_only == in_exec && !bad,
			 "exec: %zu samples inside %d execve() calls each get one record at the first return to user space: the new image's _start alone (%zu did)\n",
			 in_exec, NR_EXECS, entry_only);
	dc_log_free(&log);
}

static __attribute__((noinline)) void fork_children(void)
{
	static const char *const fork_stack[] = {
		"fork_leaf", "fork_parent", "profile", "fork_children",
		DC_MAIN_FRAMES
	};
	static const char *const in_fork[] = { "kernel_clone", "copy_process", NULL };
	size_t matched, exiting, excused, bad, forks = 0, fork_ok = 0, child = 0;
	struct perf_event_attr attr;
	struct dc_log log = { 0 };
	uint32_t tids[NR_FORKS + 1];
	size_t ntids = 0;
	pid_t pid;
	int st, where;

	dc_attr_init(&attr, PERIOD_NS, true);
	attr.inherit = 1;
	pid = profile(fork_parent, NULL, &attr, &log, 0, &st, NULL);
	if (pid < 0)
		ksft_exit_fail_msg("profiling fork: %s\n", strerror(-pid));
	bad = check_cookies(&log, &matched, &exiting, &excused);
	for (size_t i = 0; i < log.nr_samples; i++) {
		struct dc_sample *s = &log.samples[i];
		bool seen = false;
		long idx, n;

		for (size_t j = 0; j < ntids; j++)
			seen |= tids[j] == s->tid;
		if (!seen && ntids < NR_FORKS + 1)
			tids[ntids++] = s->tid;
		if (s->pid != (uint32_t)pid && s->cookie)
			child++;
		if (!s->cookie || s->pid != (uint32_t)pid || !has_any(s, in_fork))
			continue;
		forks++;
		idx = dc_find_deferred(&log, s->pid, s->tid, s->cookie, &n);
		if (idx >= 0 && dc_stack_is(log.deferred[idx].ips,
					    log.deferred[idx].nr, fork_stack,
					    ARRAY_SIZE(fork_stack), &where))
			fork_ok++;
		else if (forks - fork_ok == 1)
			dc_print_merged(s, idx >= 0 ? &log.deferred[idx] : NULL);
	}
	ksft_print_msg("fork: %zu samples from %zu tasks, %zu of children with a cookie, %zu in fork() (%zu with exactly fork_leaf <- fork_parent <- profile <- fork_children <- main <- __libc_start_call_main), %zu matched, %zu in the exit path without a cookie, %zu of a last entry without a record (excused), %zu deferred records, %zu violations\n",
		       log.nr_samples, ntids, child, forks, fork_ok, matched,
		       exiting, excused, log.nr_deferred, bad);
	/*
	 * The parent spends most of its time in fork() (it copies the page
	 * tables of 48 MiB of touched memory), so every run has hundreds of
	 * samples there:
	 * none means the stack check tested nothing, a failure.
	 */
	ksft_test_result(ntids >= 2 && child >= NR_FORKS && forks && fork_ok == forks && !bad,
			 "fork: inherited event over %zu tasks: every cookie has one record of its own task, %zu samples of fork() (at least 1 needed) show exactly fork_leaf <- fork_parent <- profile <- fork_children <- main <- __libc_start_call_main\n",
			 ntids, forks);
	dc_log_free(&log);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--exec-chain"))
		exec_next(atoi(argv[2]));

	ksft_print_header();
	ksft_set_plan(5);
	if (dc_syms_load())
		ksft_exit_fail_msg("cannot read own symbol table\n");
	dc_kallsyms_load();
	exit_with_pending_unwind();
	open_kill_rings();
	killed_in_syscall();
	exec_chain();
	fork_children();
	close_kill_rings();
	dc_finished();
}
