// SPDX-License-Identifier: GPL-2.0
/*
 * Bounded stress of deferred user callchains (issue #10, "Stress").
 *
 * A child process runs NR_THREADS worker threads (the frame-pointer
 * workload of workload.c: system calls in workload_leaf), a driver thread
 * that moves random workers between the online CPUs with
 * sched_setaffinity() every 2 ms, and a churn thread that forks
 * short-lived children, each of which forks a grandchild that exits after
 * a few system calls and then execs a tiny program (this binary with
 * --tiny: a few system calls, exit).  The child is a subreaper, so the
 * churn thread reaps them all.  The child runs at nice 15 so that the
 * test, at nice 0, keeps its rings drained.
 *
 * Two long-lived sessions sample it at 10 kHz cpu-clock at once, both
 * defer_callchain + defer_output: "task", per-task inherited events on the
 * child (one per online CPU, each with its ring, as perf record -p does:
 * an inherited per-task event cannot be mapped) opened before the child
 * creates its threads and children, which inherit them; and "cpu", one
 * CPU-wide event per online CPU (with comm, so that upstream delivers the
 * records to it: see deferred_cpu).  A third session is opened and closed
 * in a loop the whole time, alternately per-task (on a random worker,
 * pid = tid) and CPU-wide, each for 20-80 ms, half of them disabled
 * before the close and half closed enabled (fd first or ring first), so
 * that event teardown races requests and pending task_work.  And, as
 * perf_defer.sh does, the exit_group() tracepoint (raw_syscalls/sys_enter
 * filtered to id == 231, x86-64's __NR_exit_group: the churned processes
 * are this 64-bit binary), one CPU-wide event per online CPU sampling
 * every call, with defer_callchain but not defer_output (its rings get
 * its samples only): each sample carries the cookie of its process's last
 * kernel entry, the exit entry.
 *
 * It runs for stress_s=N seconds from the kernel command line (default
 * 15, so that it fits make check on 2 vCPUs), and stops by itself; the
 * number of churned processes and of stored samples is capped too.  At
 * the end the child's threads wait in pause() and the child stops itself
 * (SIGSTOP, see deferred_task.c); then the sessions are disabled and read
 * out, the child killed and reaped.
 *
 * Asserted, for the child's samples (the CPU-wide session's are filtered
 * by the pids of the child and of every churned process):
 *  1, 2. every sample of each long-lived session carries a cookie and has
 *     exactly one PERF_RECORD_CALLCHAIN_DEFERRED of its tid in the same
 *     session (searched across the session's rings), except only the
 *     excuses docs/tests.md documents, each counted and printed with its
 *     kernel stack: the thread's last cookie taken on the way into the
 *     final stop after the task_work ran (get_signal on its stack,
 *     dc_in_final_stop()); on the upstream C kernel only (variant=c... on
 *     /proc/cmdline), the samples of a churned process's exit entry,
 *     whose record upstream loses at exit (docs/deviations.md): those
 *     whose (pid, tid, cookie) is that of the process's exit_group()
 *     tracepoint sample, also one taken before do_exit() is on the
 *     stack (none on Rust, which must write that record); a lost
 *     record of the session in the time of the sample's entry (the rule
 *     of dc_lost_in_window(), dc_util.h: per-CPU rings, so any ring of
 *     the session, by CLOCK_MONOTONIC time; drops at the end that no
 *     PERF_RECORD_LOST reports are read with PERF_FORMAT_LOST), which
 *     only separates the failures: any loss fails 5.  A sample without a
 *     cookie must be in the exit path (PF_EXITING refuses the request):
 *     taken after its task's exit_group() tracepoint sample (exit_began();
 *     how many also have do_exit() on their kernel stack is printed).
 *     Printed, not asserted: how many churned processes' exit entries
 *     the tracepoint saw, how many samples they excused, and how many
 *     have their record in each session (figures: docs/tests.md).
 *  3. no record has a kernel address, a non-MISC_USER misc, no entry or
 *     the cache poison, nor (on Rust) another non-user address (upstream
 *     records a garbage return address read from frameless code:
 *     docs/deviations.md, "Other deliberate differences"; counted and
 *     printed on C); no (tid, cookie) has two records in one session;
 *     no sample carries the cookie of a record of another tid; the same
 *     for every third session.
 *  4. every record that starts in workload_leaf is exactly the workload's
 *     chain down to thread_main <- start_thread (DC_THREAD_FRAMES).
 *  5. nothing lost in the long-lived sessions (rings of RING_PAGES pages,
 *     read every 10 ms): no PERF_RECORD_LOST, and no drop the events
 *     counted (PERF_FORMAT_LOST) after their last record; nor in the
 *     exit_group() tracepoint's rings (a lost exit entry would be an
 *     orphan without evidence on C, but it must not pass silently).
 *  6. the stress happened: samples in both sessions, migrations, forks,
 *     execs, third sessions of both kinds with the child's samples; and
 *     no third-session orphan without evidence.  A third session misses
 *     the record of an entry whose task_work ran while its event on that
 *     CPU was not enabled yet, or no longer enabled or read: the entry
 *     still running at the close, or unwound (for an earlier request)
 *     before the open, a sample after that carrying its cookie.  The
 *     evidence is the time the entry's record was written, from the
 *     long-lived sessions (which get every record of the child's threads:
 *     the callback writes each record to every defer_output event it
 *     reaches, in one pass), against the moments the session was open on
 *     every CPU, all CLOCK_MONOTONIC (dc_edge(), dc_util.h): written at
 *     or after the close began, or at or before the last enable returned,
 *     each within DC_TIME_SLACK_NS.  Capped per session, tid and edge at
 *     one entry for a per-task session, one per CPU for a CPU-wide one
 *     (judge_cands()).  A lost record of the third session itself in the
 *     entry's time also explains one.  Any other fails (no record in the
 *     long-lived sessions, a record written while the session was open on
 *     every CPU, an entry beyond the cap), printed with its session,
 *     times and the tid's next sample.
 *  7. every churned process was reaped.
 *  8. kmalloc-4k (the per-task unwind cache is one 4 KiB kmalloc) has
 *     grown by at least NR_THREADS / 2 objects at the end of the run (the
 *     workers' caches: the count sees them) and is back within SLAB_TOL
 *     objects of its baseline once every task of the child is gone
 *     (after a shrink, which also empties KASAN's quarantine of the
 *     cache; retried with sleeps for the RCU frees);
 *     without /sys/kernel/slab/kmalloc-4k or /proc/slabinfo (the test
 *     kernels' SLUB_TINY) it is a skip, never a pass.
 * Kernel warnings are the log checker's.
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
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest.h"
#include "dc_util.h"
#include "workload.h"

#define PERIOD_NS	100000		/* 10 kHz */
#define RING_PAGES	1024		/* 4 MiB per CPU and session */
#define THIRD_PAGES	128
#define EXIT_PAGES	32		/* the exit_group() tracepoint's, per CPU */
#define NR_EXIT_GROUP	231		/* x86-64 __NR_exit_group */
#define DRAIN_MS	10
#define NR_THREADS	32
#define SLICE_MS	5		/* workload() per loop, CPU time */
#define MIGRATE_US	2000
#define MAX_CPUS	16
#define MAX_PIDS	4096		/* churned processes, capped */
#define MAX_OUTSTANDING	6
#define MAX_SAMPLES	(1500000)	/* per long-lived session */
#define DEFAULT_S	15
#define STOP_TIMEOUT_MS	60000
#define THIRD_MIN_MS	20
#define THIRD_MAX_MS	80
#define SLAB_TOL	8		/* kmalloc-4k objects */
#define MIN_SAMPLES	200
#define MIN_LEAF	20
#define NK		6		/* kernel frames kept for evidence */
#define KERNEL_MIN	0xffff800000000000ULL	/* x86-64 kernel half */

static const char *const leaf_chain[] = { WORKLOAD_CHAIN, DC_THREAD_FRAMES };
#define NR_LEAF_CHAIN ((int)ARRAY_SIZE(leaf_chain))

/* ---- shared with the child ---- */

struct shm {
	volatile int stop;
	volatile int tids[NR_THREADS];
	int nr_pids;
	int pids[MAX_PIDS];
	long forks, execs, exits, migrations, migrate_fail, churn_fail;
	int workers_done, churn_done, driver_done;
};

static struct shm *shm;
static int cpus[MAX_CPUS], nr_cpus;

static void add_pid(int pid)
{
	int i = __atomic_fetch_add(&shm->nr_pids, 1, __ATOMIC_RELAXED);

	if (i < MAX_PIDS)
		shm->pids[i] = pid;
}

__attribute__((noinline)) void *thread_main(void *arg)
{
	int i = (int)(long)arg;

	shm->tids[i] = syscall(SYS_gettid);
	while (!shm->stop)
		workload(SLICE_MS);
	asm volatile("" ::: "memory");	/* not a tail call */
	__atomic_add_fetch(&shm->workers_done, 1, __ATOMIC_RELEASE);
	for (;;)
		pause();
	return NULL;
}

static unsigned int rnd_state;

static unsigned int rnd(unsigned int n)
{
	rnd_state = rnd_state * 1103515245 + 12345;
	return (rnd_state >> 8) % n;
}

static void *driver_main(void *arg)
{
	unsigned int st = (unsigned int)(long)arg;

	setpriority(PRIO_PROCESS, syscall(SYS_gettid), 0);	/* mostly asleep */

	while (!shm->stop) {
		int w, c;
		cpu_set_t set;
		pid_t tid;

		st = st * 1103515245 + 12345;
		w = (st >> 8) % NR_THREADS;
		tid = shm->tids[w];
		/* A few per wake-up: TCG stretches the sleeps. */
		for (int k = 0; tid && k < 4; k++, tid = shm->tids[(w + 7 * k) % NR_THREADS]) {
			c = cpus[((st >> 16) + k) % nr_cpus];
			CPU_ZERO(&set);
			CPU_SET(c, &set);
			if (sched_setaffinity(tid, sizeof(set), &set))
				__atomic_add_fetch(&shm->migrate_fail, 1, __ATOMIC_RELAXED);
			else
				__atomic_add_fetch(&shm->migrations, 1, __ATOMIC_RELAXED);
		}
		usleep(MIGRATE_US);
	}
	__atomic_add_fetch(&shm->driver_done, 1, __ATOMIC_RELEASE);
	for (;;)
		pause();
	return NULL;
}

static void spin_syscalls(int n)
{
	for (int i = 0; i < n; i++)
		dc_syscall3(__NR_getppid, 0, 0, 0);
}

static void *churn_main(void *arg)
{
	long outstanding = 0;
	char *const argv[] = { "deferred_stress", "--tiny", NULL };

	(void)arg;
	setpriority(PRIO_PROCESS, syscall(SYS_gettid), 5);	/* more churn */
	while (!shm->stop &&
	       __atomic_load_n(&shm->nr_pids, __ATOMIC_RELAXED) + 2 < MAX_PIDS) {
		pid_t g = fork();

		if (g < 0) {
			__atomic_add_fetch(&shm->churn_fail, 1, __ATOMIC_RELAXED);
			usleep(1000);
		} else if (g == 0) {
			pid_t gg;

			add_pid(getpid());
			gg = fork();
			if (gg == 0) {
				spin_syscalls(200);
				_exit(0);
			}
			if (gg > 0) {
				add_pid(gg);
				__atomic_add_fetch(&shm->forks, 1, __ATOMIC_RELAXED);
			}
			spin_syscalls(100);
			__atomic_add_fetch(&shm->execs, 1, __ATOMIC_RELAXED);
			execv("/proc/self/exe", argv);
			_exit(1);
		} else {
			__atomic_add_fetch(&shm->forks, 1, __ATOMIC_RELAXED);
			outstanding += 2;
		}
		/* Reap whatever exited; block while too many are around. */
		for (;;) {
			pid_t w = waitpid(-1, NULL, outstanding > MAX_OUTSTANDING ? 0 : WNOHANG);

			if (w <= 0)
				break;
			outstanding--;
			__atomic_add_fetch(&shm->exits, 1, __ATOMIC_RELAXED);
		}
	}
	/* The child is a subreaper: orphaned grandchildren come here too. */
	while (waitpid(-1, NULL, 0) > 0)
		__atomic_add_fetch(&shm->exits, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&shm->churn_done, 1, __ATOMIC_RELEASE);
	for (;;)
		pause();
	return arg;
}

static void child_main(int go)
{
	pthread_t t;
	char c;

	prctl(PR_SET_CHILD_SUBREAPER, 1);
	setpriority(PRIO_PROCESS, 0, 15);
	if (read(go, &c, 1) != 1)
		_exit(3);
	/* Created after the events were opened: they inherit them. */
	for (long i = 0; i < NR_THREADS; i++)
		if (pthread_create(&t, NULL, thread_main, (void *)i))
			_exit(4);
	if (pthread_create(&t, NULL, driver_main, (void *)(long)rnd(1 << 30)) ||
	    pthread_create(&t, NULL, churn_main, NULL))
		_exit(4);
	while (__atomic_load_n(&shm->workers_done, __ATOMIC_ACQUIRE) < NR_THREADS ||
	       !__atomic_load_n(&shm->churn_done, __ATOMIC_ACQUIRE) ||
	       !__atomic_load_n(&shm->driver_done, __ATOMIC_ACQUIRE))
		usleep(5000);
	/* Stops every thread; each runs its task_work on the way. */
	raise(SIGSTOP);
	_exit(0);
}

/* ---- compact logs ---- */

enum {
	F_COOKIE = 1, F_EXIT = 2, F_SIGNAL = 4, F_RETURN = 8, F_USERCTX = 16,
};

struct smp {
	uint32_t pid, tid;
	uint64_t time, cookie;
	uint16_t flags;
	uint8_t ring, nk;
	uint64_t k[NK];
};

struct rec {
	uint32_t pid, tid;
	uint64_t cookie, time;
	uint32_t nr, nsamp;
	uint8_t bad, kaddr, nonuser, leaf, leaf_ok, ring;
};

struct sess {
	const char *name;
	struct smp *s;
	size_t ns, caps;
	struct rec *r;
	size_t nr, capr;
	uint64_t lost, lost_records, malformed;
	struct dc_log tmp;
};

static const char *const exit_names[] = { "do_exit", "do_group_exit", NULL };
static const char *const signal_names[] = {
	"get_signal", "arch_do_signal_or_restart", NULL
};
static const char *const return_names[] = {
	"exit_to_user_mode_loop", "resume_user_mode_work", "task_work_run",
	"irqentry_exit_to_user_mode", "syscall_exit_to_user_mode", NULL
};

enum { K_EXIT = 1, K_SIGNAL = 2, K_RETURN = 4, K_SCHEDULE = 8, K_IRQEXIT = 16 };

static bool name_in(const char *n, const char *const *names)
{
	for (int j = 0; names[j]; j++)
		if (!strcmp(n, names[j]))
			return true;
	return false;
}

/* What a kernel frame is, by its function; cached by address. */
static unsigned int frame_class(uint64_t ip)
{
	static struct { uint64_t ip; unsigned int cls; } cache[8192];
	unsigned int h = (unsigned int)((ip * 0x9e3779b97f4a7c15ULL) >> 51);
	const char *n;
	unsigned int cls = 0;

	if (cache[h].ip == ip)
		return cache[h].cls;
	n = dc_ksym(ip);
	cls |= name_in(n, exit_names) ? K_EXIT : 0;
	cls |= name_in(n, signal_names) ? K_SIGNAL : 0;
	cls |= name_in(n, return_names) ? K_RETURN : 0;
	cls |= !strcmp(n, "schedule") ? K_SCHEDULE : 0;
	cls |= !strcmp(n, "irqentry_exit") ? K_IRQEXIT : 0;
	cache[h].ip = ip;
	cache[h].cls = cls;
	return cls;
}

/*
 * Sample flags from its kernel stack: exit path, signal path, return to
 * user space (the exit-to-user loop, where the task_work runs; on x86 it
 * is inlined into irqentry_exit() or do_syscall_64(), and schedule()
 * called straight from irqentry_exit() is the loop's, as is a sample that
 * interrupted irqentry_exit() itself).
 */
static unsigned int stack_flags(const struct dc_sample *s)
{
	unsigned int f = 0, prev = 0;

	for (uint32_t i = 0; i < s->nr_kernel; i++) {
		unsigned int c = frame_class(s->kernel[i]);

		f |= c & K_EXIT ? F_EXIT : 0;
		f |= c & K_SIGNAL ? F_SIGNAL : 0;
		f |= c & K_RETURN ? F_RETURN : 0;
		if ((prev & K_SCHEDULE) && (c & K_IRQEXIT))
			f |= F_RETURN;
		/*
		 * Interrupted in irqentry_exit() itself: its interrupts are
		 * enabled only in the inlined exit-to-user loop.
		 */
		if (i == 0 && (c & K_IRQEXIT))
			f |= F_RETURN;
		prev = c;
	}
	return f;
}

static uint64_t leaf_addr, leaf_size;

#define GROWV(arr, nr, cap) do {					\
	if ((nr) == (cap)) {						\
		(cap) = (cap) ? 2 * (cap) : 4096;			\
		(arr) = realloc((arr), (cap) * sizeof(*(arr)));		\
		if (!(arr))						\
			ksft_exit_fail_msg("out of memory\n");		\
	}								\
} while (0)

/* Move what the temporary log got into the session's compact log. */
static void compact(struct sess *S)
{
	struct dc_log *t = &S->tmp;

	for (size_t i = 0; i < t->nr_samples; i++) {
		struct dc_sample *s = &t->samples[i];
		struct smp *c;

		if (S->ns >= MAX_SAMPLES)
			break;
		GROWV(S->s, S->ns, S->caps);
		c = &S->s[S->ns++];
		memset(c, 0, sizeof(*c));
		c->pid = s->pid;
		c->tid = s->tid;
		c->time = s->time;
		c->ring = s->ring;
		if (s->ends_deferred && s->cookie) {
			c->cookie = s->cookie;
			c->flags |= F_COOKIE;
		}
		c->flags |= s->has_user_ctx ? F_USERCTX : 0;
		c->flags |= stack_flags(s);
		c->nk = s->nr_kernel < NK ? s->nr_kernel : NK;
		memcpy(c->k, s->kernel, c->nk * sizeof(c->k[0]));
	}
	for (size_t i = 0; i < t->nr_deferred; i++) {
		struct dc_deferred *d = &t->deferred[i];
		struct rec *r;
		bool fl;

		GROWV(S->r, S->nr, S->capr);
		r = &S->r[S->nr++];
		memset(r, 0, sizeof(*r));
		r->pid = d->pid;
		r->tid = d->tid;
		r->cookie = d->cookie;
		r->time = d->time;
		r->nr = d->nr;
		r->ring = d->ring;
		r->bad = d->misc != PERF_RECORD_MISC_USER || !d->nr;
		for (uint32_t j = 0; j < d->nr; j++) {
			if (d->ips[j] >= KERNEL_MIN)
				r->kaddr = 1;
			else if (d->ips[j] >= DC_USER_MAX)
				r->nonuser = 1;
		}
		if (r->bad || r->kaddr || r->nonuser) {
			static int printed;

			if (printed++ < 4) {
				ksft_print_msg("%s: record misc %#x, %u entries%s%s:\n",
					       S->name, d->misc, d->nr,
					       r->kaddr ? ", a kernel address" : "",
					       r->nonuser ? ", a non-user address" : "");
				dc_print_merged(&(struct dc_sample){ .pid = d->pid,
						.tid = d->tid, .cookie = d->cookie }, d);
			}
		}
		if (d->nr && d->ips[0] >= leaf_addr && d->ips[0] < leaf_addr + leaf_size) {
			r->leaf = 1;
			r->leaf_ok = dc_check_leaf_record(d, "workload_leaf", leaf_chain,
							  NR_LEAF_CHAIN, &fl) == 1;
			if (!r->leaf_ok) {
				static int printed;

				if (printed++ < 3) {
					ksft_print_msg("%s: leaf record with a wrong chain:\n", S->name);
					dc_print_merged(&(struct dc_sample){ .pid = d->pid,
							.tid = d->tid, .cookie = d->cookie }, d);
				}
			}
		}
	}
	S->lost += t->lost;
	S->lost_records += t->lost_records;
	S->malformed += t->malformed;
	/* The lost records stay in the temporary log: the evidence. */
	t->nr_samples = t->nr_deferred = 0;
	t->lost = t->lost_records = t->malformed = 0;
}

static void drain(struct sess *S, struct dc_ring *r, int n)
{
	for (int i = 0; i < n; i++) {
		dc_ring_drain(&r[i], &S->tmp);
		compact(S);
	}
}

static void sess_free(struct sess *S)
{
	free(S->s);
	free(S->r);
	dc_log_free(&S->tmp);
	S->s = NULL;
	S->r = NULL;
	S->ns = S->caps = S->nr = S->capr = 0;
}

/* ---- analysis ---- */

static bool is_c;
static pid_t child_pid;
static int *tree;		/* sorted pids of the child's tree */
static size_t nr_tree;

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return x < y ? -1 : x > y;
}

static bool in_tree(uint32_t pid)
{
	int p = pid;

	return bsearch(&p, tree, nr_tree, sizeof(int), cmp_int) != NULL;
}

static void build_tree(void)
{
	int n = shm->nr_pids < MAX_PIDS ? shm->nr_pids : MAX_PIDS;

	tree = calloc(n + 1, sizeof(int));
	if (!tree)
		ksft_exit_fail_msg("out of memory\n");
	tree[0] = child_pid;
	for (int i = 0; i < n; i++)
		tree[i + 1] = shm->pids[i];
	nr_tree = n + 1;
	qsort(tree, nr_tree, sizeof(int), cmp_int);
}

/*
 * The exit entries: every sample of the exit_group() tracepoint (a
 * CPU-wide event per CPU, filtered to id == NR_EXIT_GROUP) while the
 * sessions were enabled, its (pid, tid, cookie) (dc_tp_collect()); after
 * build_tree(), only those of the child's tree.  The cookie is that of the
 * task's last kernel entry, exit_group(), which every sample of that entry
 * carries too.  An entry's mark is the last session it excused a sample
 * in.  exits.log keeps the tracepoint's losses.
 */
static struct dc_tp_hits exits;

/*
 * Whether @s's task had entered exit_group() when @s was taken: the
 * tracepoint's sample of the same (pid, tid) at or before @s's time (one
 * clock: CLOCK_MONOTONIC).  From there on PF_EXITING refuses every
 * request, so a sample without a cookie is the exit's.  The evidence is
 * the tracepoint, not the sample's kernel stack, which a kernel whose
 * unwinder stops at a retpoline thunk cannot show (docs/tests.md).
 */
static bool exit_began(const struct smp *s)
{
	for (size_t i = 0; i < exits.nr; i++) {
		const struct dc_tp_hit *x = &exits.v[i];

		if (x->pid == s->pid && x->tid == s->tid && x->time <= s->time)
			return true;
	}
	return false;
}

/* Keep the exit entries of the child's tree only. */
static void keep_tree_exits(void)
{
	size_t n = 0;

	for (size_t i = 0; i < exits.nr; i++)
		if (in_tree(exits.v[i].pid))
			exits.v[n++] = exits.v[i];
	exits.nr = n;
	exits.sorted = false;
}

static int cmp_smp(const void *a, const void *b)
{
	const struct smp *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->time < y->time ? -1 : x->time > y->time;
}

static int cmp_rec(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;

	if (x->cookie != y->cookie)
		return x->cookie < y->cookie ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

struct fig {
	size_t samples, records, matched, dup, tid_mismatch, orphans;
	size_t no_cookie_exit, no_cookie_bad, bad_records, leaf, leaf_bad;
	size_t no_cookie_kstack;	/* of no_cookie_exit: do_exit() on the stack too */
	size_t kaddr, nonuser;
	size_t rec_no_sample, foreign;
	/* excuses */
	size_t final_stop, exit_c, at_close, before_open;
	size_t exit_c_entries;	/* exit_group() entries exit_c's samples are in */
	size_t orphan_cookies;
	size_t lost_excused;	/* a lost record in the entry's time */
	size_t close_entries, open_entries;	/* third: entries at_close, before_open */
};

static const char *third_ctx = "";
/*
 * A third session's events are enabled, and disabled or closed, one CPU
 * after the other: it is fully open only from open_done (the last enable
 * returned) to close_start (the first disable or close began, or, closed
 * enabled, the last read of its rings began), in CLOCK_MONOTONIC ns, the
 * clock of every session's sample and record times.
 */
static uint64_t open_done, close_start;

static void print_kstack(const char *what, const struct smp *s)
{
	char buf[512];
	int len = 0;

	for (int i = 0; i < s->nk && len < 400; i++)
		len += snprintf(buf + len, sizeof(buf) - len, "%s%s",
				i ? " <- " : "", dc_ksym(s->k[i]));
	buf[len] = 0;
	ksft_print_msg("%s: pid %u tid %u ring %d time %llu cookie %#llx kernel %s\n",
		       what, s->pid, s->tid, s->ring, (unsigned long long)s->time,
		       (unsigned long long)s->cookie, buf);
}

/*
 * @third: a session opened and closed during the run (excuses: the
 * entry still running at the close, the unwind done before the open);
 * otherwise a long-lived one (excuse: the final stop).  @filter: which
 * samples count (ALL, the child's TREE, the CHILD process only).
 */
enum { ALL, TREE, CHILD };

static bool counted(int filter, uint32_t pid)
{
	return filter == ALL || (filter == TREE && in_tree(pid)) ||
	       (filter == CHILD && pid == (uint32_t)child_pid);
}

/*
 * The window of the entry of sample @i (in the tid's samples @g..@e, by
 * time) among its thread's items of other entries: its samples, and its
 * records (@by_tid: indices of @S's records by tid and time).  See
 * dc_window_narrow().
 */
static const struct rec *sort_recs;

static int cmp_by_tid(const void *a, const void *b)
{
	const struct rec *x = &sort_recs[*(const size_t *)a];
	const struct rec *y = &sort_recs[*(const size_t *)b];

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->time < y->time ? -1 : x->time > y->time;
}

static size_t *recs_by_tid(const struct sess *S)
{
	size_t *idx = calloc(S->nr + 1, sizeof(*idx));

	if (!idx)
		ksft_exit_fail_msg("out of memory\n");
	for (size_t i = 0; i < S->nr; i++)
		idx[i] = i;
	sort_recs = S->r;
	qsort(idx, S->nr, sizeof(*idx), cmp_by_tid);
	return idx;
}

static void sess_window(const struct sess *S, const size_t *by_tid, size_t g,
			size_t e, size_t i, uint64_t *lo, uint64_t *hi)
{
	const struct smp *s = &S->s[i];
	size_t a = 0, b = S->nr;

	*lo = 0;
	*hi = UINT64_MAX;
	for (size_t j = g; j < e; j++)
		if (S->s[j].pid == s->pid)
			dc_window_narrow(lo, hi, s->cookie, s->time, S->s[j].cookie,
					 S->s[j].time);
	while (a < b) {		/* the tid's first record */
		size_t mid = (a + b) / 2;

		if (S->r[by_tid[mid]].tid < s->tid)
			a = mid + 1;
		else
			b = mid;
	}
	for (; a < S->nr && S->r[by_tid[a]].tid == s->tid; a++) {
		const struct rec *r = &S->r[by_tid[a]];

		if (r->pid == s->pid)
			dc_window_narrow(lo, hi, s->cookie, s->time, r->cookie, r->time);
	}
}

/*
 * A third session's orphan sample without a lost record to explain it:
 * judged at the end, when the long-lived sessions have the record of its
 * entry (written after the session closed, for one still running then).
 */
struct cand {
	struct smp s;
	int session;
	bool cpu_wide;
	uint64_t open_done, close_start;
	uint64_t next_time, next_cookie;	/* the tid's next sample of another entry */
	int next_ring;
	char ctx[128];
};

static struct cand *cands;
static size_t nr_cands, cap_cands;
static int third_n;
static bool third_cpu_wide;

static void analyze(struct sess *S, int filter, bool third, struct fig *f)
{
	size_t *by_tid = NULL;
	int evidence = 0;

	qsort(S->s, S->ns, sizeof(*S->s), cmp_smp);
	qsort(S->r, S->nr, sizeof(*S->r), cmp_rec);
	f->records += S->nr;
	for (size_t i = 0; i < S->nr; i++) {
		f->bad_records += S->r[i].bad;
		f->kaddr += S->r[i].kaddr;
		f->nonuser += S->r[i].nonuser;
		f->leaf += S->r[i].leaf;
		f->leaf_bad += S->r[i].leaf && !S->r[i].leaf_ok;
		if (i && S->r[i].cookie == S->r[i - 1].cookie &&
		    S->r[i].tid == S->r[i - 1].tid) {
			if (f->dup++ < 3)
				ksft_print_msg("%s: cookie %#llx of tid %u in two records\n",
					       S->name, (unsigned long long)S->r[i].cookie,
					       S->r[i].tid);
		}
	}
	for (size_t g = 0; g < S->ns;) {
		size_t e = g;
		uint64_t last = 0, prev_orphan = 0;

		while (e < S->ns && S->s[e].tid == S->s[g].tid)
			e++;
		for (size_t i = g; i < e; i++)
			if (S->s[i].cookie)
				last = S->s[i].cookie;
		for (size_t i = g; i < e; i++) {
			struct smp *s = &S->s[i];
			struct rec key = { .cookie = s->cookie, .tid = 0 };
			size_t lo = 0, hi = S->nr, n = 0;
			bool churned = s->pid != (uint32_t)child_pid;
			const struct dc_lost *l = NULL;
			uint64_t wlo = 0, whi = UINT64_MAX;
			struct dc_tp_hit *x;

			if (!counted(filter, s->pid)) {
				f->foreign++;
				continue;
			}
			f->samples++;
			if (!s->cookie) {
				if (exit_began(s)) {
					f->no_cookie_exit++;
					f->no_cookie_kstack += !!(s->flags & F_EXIT);
				} else if (f->no_cookie_bad++ < 3) {
					print_kstack("no cookie, and no exit_group() of its task before it", s);
				}
				continue;
			}
			while (lo < hi) {	/* first record with this cookie */
				size_t mid = (lo + hi) / 2;

				if (cmp_rec(&S->r[mid], &key) < 0)
					lo = mid + 1;
				else
					hi = mid;
			}
			for (size_t j = lo; j < S->nr && S->r[j].cookie == s->cookie; j++) {
				if (S->r[j].tid == s->tid) {
					n++;
					S->r[j].nsamp++;
				} else if (f->tid_mismatch++ < 3) {
					ksft_print_msg("%s: sample of tid %u has cookie %#llx of a record of tid %u\n",
						       S->name, s->tid,
						       (unsigned long long)s->cookie,
						       S->r[j].tid);
				}
			}
			if (n == 1) {
				f->matched++;
				continue;
			}
			if (n > 1)
				continue;	/* counted in dup */
			if (!third && !churned && s->cookie == last &&
			    (s->flags & F_SIGNAL)) {
				f->final_stop++;
				if (evidence++ < 3)
					print_kstack("excused: final stop (last cookie, task_work already ran)", s);
				continue;
			}
			/*
			 * Upstream C loses the record of a task's last entry
			 * at exit (docs/deviations.md): every sample of that entry,
			 * also one taken before do_exit() is on the stack (at
			 * the start of exit_group, or preempted there).  A
			 * churned process's exit entry is named by the cookie
			 * of its exit_group() tracepoint sample.
			 */
			x = is_c && churned ? dc_tp_find(&exits, s->pid, s->tid, s->cookie) : NULL;
			if (x) {
				f->exit_c++;
				if (x->mark != S)
					f->exit_c_entries++;
				x->mark = S;
				if (evidence++ < 3)
					print_kstack("excused on upstream C: the record of its exit_group() entry lost at exit",
						     s);
				continue;
			}
			/*
			 * A lost record of this session in the entry's time
			 * (dc_util.h: per-CPU rings, any ring, by time).
			 */
			if (S->tmp.nr_losts) {
				if (!by_tid)
					by_tid = recs_by_tid(S);
				sess_window(S, by_tid, g, e, i, &wlo, &whi);
				l = dc_lost_in_window(&S->tmp, wlo, whi);
			}
			if (l) {
				f->lost_excused++;
				if (f->lost_excused <= 3) {
					print_kstack("excused: a lost record in its entry's time", s);
					dc_print_lost("  by", l);
				}
				continue;
			}
			if (third) {
				/* Judged at the end, by its record's time. */
				struct cand *c;

				GROWV(cands, nr_cands, cap_cands);
				c = &cands[nr_cands++];
				memset(c, 0, sizeof(*c));
				c->s = *s;
				c->session = third_n;
				c->cpu_wide = third_cpu_wide;
				c->open_done = open_done;
				c->close_start = close_start;
				for (size_t j = i + 1; j < e && !c->next_time; j++) {
					if (S->s[j].cookie == s->cookie)
						continue;
					c->next_time = S->s[j].time;
					c->next_cookie = S->s[j].cookie;
					c->next_ring = S->s[j].ring;
				}
				snprintf(c->ctx, sizeof(c->ctx), "%s", third_ctx);
				continue;
			}
			f->orphans++;
			if (s->cookie != prev_orphan)
				f->orphan_cookies++;
			prev_orphan = s->cookie;
			if (f->orphans <= 5) {
				print_kstack("orphan sample without evidence", s);
				if (S->tmp.nr_losts)
					ksft_print_msg("  its entry ran between %llu and %llu: no lost record of the session there\n",
						       (unsigned long long)wlo,
						       (unsigned long long)whi);
				else
					ksft_print_msg("  the session has no lost record\n");
			}
		}
		g = e;
	}
	for (size_t i = 0; i < S->nr; i++)
		f->rec_no_sample += !S->r[i].nsamp;
	free(by_tid);
}

/* The long-lived sessions' records of (@tid, @cookie): how many, when. */
static size_t find_times(const struct sess *S, uint32_t pid, uint32_t tid,
			 uint64_t cookie, uint64_t *tmin, uint64_t *tmax)
{
	struct rec key = { .cookie = cookie, .tid = tid };
	size_t lo = 0, hi = S->nr, n = 0;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (cmp_rec(&S->r[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < S->nr && S->r[lo].cookie == cookie && S->r[lo].tid == tid; lo++) {
		if (S->r[lo].pid != pid)
			continue;
		n++;
		if (S->r[lo].time < *tmin)
			*tmin = S->r[lo].time;
		if (S->r[lo].time > *tmax)
			*tmax = S->r[lo].time;
	}
	return n;
}

/*
 * The third sessions' orphans without a lost record (cands), at the end:
 * each is excused only by the time its entry's record was written, in the
 * long-lived sessions (open the whole run, CLOCK_MONOTONIC like the third
 * sessions and the moments they opened and closed), dc_edge(): at or
 * after the session's close began (its entry still running then, its
 * record written after the events on that CPU were disabled or last read)
 * or at or before it was open on every CPU (the unwind ran, for an
 * earlier request, before the event of the CPU it ran on was enabled; a
 * sample after that in the same entry carries its cookie).  Capped: per
 * session, tid and edge at most one entry for a per-task session (one
 * event, enabled and disabled at one moment, which one entry spans) and
 * one per CPU for a CPU-wide one (an entry sampled on one CPU and unwound
 * on another; more would need the thread to migrate back and forth within
 * the close).  Everything else fails: no record in the long-lived
 * sessions, a record written while the session was open on every CPU,
 * or an entry beyond the cap.
 */
static void judge_cands(const struct sess *task, const struct sess *cpu,
			struct fig *f)
{
	int prev_session = -1, printed = 0;
	uint32_t prev_tid = 0;
	uint64_t prev_cookie = 0;
	size_t per_edge[3] = { 0 };
	int verdict = DC_EDGE_NONE;
	uint64_t tmin = 0, tmax = 0;
	size_t n = 0;

	for (size_t i = 0; i < nr_cands; i++) {
		struct cand *c = &cands[i];
		bool new_entry = c->session != prev_session || c->s.tid != prev_tid ||
				 c->s.cookie != prev_cookie;
		size_t cap = c->cpu_wide ? (size_t)nr_cpus : 1;
		const char *why = NULL;

		if (c->session != prev_session || c->s.tid != prev_tid)
			memset(per_edge, 0, sizeof(per_edge));
		if (new_entry) {
			tmin = UINT64_MAX;
			tmax = 0;
			n = find_times(task, c->s.pid, c->s.tid, c->s.cookie, &tmin, &tmax) +
			    find_times(cpu, c->s.pid, c->s.tid, c->s.cookie, &tmin, &tmax);
			verdict = DC_EDGE_NONE;
			if (n && dc_edge(tmax, c->open_done, c->close_start) == DC_EDGE_CLOSE)
				verdict = DC_EDGE_CLOSE;
			else if (n && dc_edge(tmin, c->open_done, c->close_start) == DC_EDGE_OPEN)
				verdict = DC_EDGE_OPEN;
			if (verdict != DC_EDGE_NONE) {
				per_edge[verdict]++;
				if (verdict == DC_EDGE_CLOSE)
					f->close_entries++;
				else
					f->open_entries++;
			}
			prev_session = c->session;
			prev_tid = c->s.tid;
			prev_cookie = c->s.cookie;
		}
		if (!n)
			why = "no record of its entry in the long-lived sessions";
		else if (verdict == DC_EDGE_NONE)
			why = "its record was written while the session was open on every CPU";
		else if (per_edge[verdict] > cap)
			why = "beyond the cap of entries per session, tid and edge";
		if (!why) {
			if (verdict == DC_EDGE_CLOSE)
				f->at_close++;
			else
				f->before_open++;
			continue;
		}
		f->orphans++;
		if (new_entry)
			f->orphan_cookies++;
		if (printed++ >= 10)
			continue;
		ksft_print_msg("%s: orphan sample without evidence (%s): tid %u cookie %#llx ring %d time %llu; session open on every CPU from %llu to %llu; %zu record(s) in the long-lived sessions, written %llu..%llu\n",
			       c->ctx, why, c->s.tid, (unsigned long long)c->s.cookie,
			       c->s.ring, (unsigned long long)c->s.time,
			       (unsigned long long)c->open_done,
			       (unsigned long long)c->close_start, n,
			       (unsigned long long)(n ? tmin : 0),
			       (unsigned long long)tmax);
		print_kstack("  sample", &c->s);
		if (c->next_time)
			ksft_print_msg("  next sample of tid %u of another entry: +%llu ns, cookie %#llx, ring %d\n",
				       c->s.tid,
				       (unsigned long long)(c->next_time - c->s.time),
				       (unsigned long long)c->next_cookie, c->next_ring);
	}
}

static void add_fig(struct fig *a, const struct fig *b)
{
	size_t *x = (size_t *)a;
	const size_t *y = (const size_t *)b;

	for (size_t i = 0; i < sizeof(*a) / sizeof(size_t); i++)
		x[i] += y[i];
}

/* ---- sessions ---- */

static void raise_paranoia_ok(void)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "w");

	if (f) {
		fputs("-1\n", f);
		fclose(f);
	}
}

/*
 * Every session's times are CLOCK_MONOTONIC (use_clockid): one clock on
 * every CPU, for the lost-record rule across per-CPU rings (dc_util.h),
 * and the clock of the moments the third sessions open and close.  And
 * the drops no PERF_RECORD_LOST reports (PERF_FORMAT_LOST).
 */
static void set_clock_lost(struct perf_event_attr *attr)
{
	attr->use_clockid = 1;
	attr->clockid = CLOCK_MONOTONIC;
	attr->read_format = PERF_FORMAT_LOST;
}

static void open_rings(struct dc_ring *r, pid_t pid, bool cpu_wide, bool inherit,
		       size_t pages, int id0)
{
	struct perf_event_attr attr;

	dc_attr_init(&attr, PERIOD_NS, true);
	attr.inherit = inherit;
	set_clock_lost(&attr);
	if (cpu_wide)
		attr.comm = 1;	/* a side-band event on upstream too */
	for (int i = 0; i < nr_cpus; i++) {
		int err = dc_ring_open(&r[i], &attr, pid, cpus[i], pages, id0 + i);

		if (err)
			ksft_exit_fail_msg("event on CPU %d (pid %d): %s\n", cpus[i],
					   pid, strerror(-err));
	}
}

/*
 * The exit_group() tracepoint: raw_syscalls/sys_enter filtered to id ==
 * NR_EXIT_GROUP (the churned processes are this 64-bit binary), one
 * CPU-wide event per CPU, every call sampled (dc_tp_rings_open()).
 */
static void open_exit_rings(struct dc_ring *r)
{
	char filter[32];
	int err;

	snprintf(filter, sizeof(filter), "id == %d", NR_EXIT_GROUP);
	err = dc_tp_rings_open(r, cpus, nr_cpus, "raw_syscalls", "sys_enter", filter,
			       EXIT_PAGES, 0);
	if (err)
		ksft_exit_fail_msg("the exit_group() tracepoint: %s\n", strerror(-err));
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

static int cmdline_int(const char *key, int def)
{
	char buf[4096], *p;
	FILE *f = fopen("/proc/cmdline", "r");
	size_t n;

	if (!f)
		return def;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	for (p = strstr(buf, key); p; p = strstr(p + 1, key))
		if ((p == buf || p[-1] == ' ') && p[strlen(key)] == '=')
			return atoi(p + strlen(key) + 1);
	return def;
}

/* ---- kmalloc-4k ---- */

static long k4k_read(const char **src)
{
	char line[256], name[64];
	long v = -1;
	FILE *f;
	int fd;

	fd = open("/sys/kernel/slab/kmalloc-4k/shrink", O_WRONLY);
	if (fd >= 0) {
		if (write(fd, "1", 1) < 0)
			ksft_print_msg("kmalloc-4k shrink: %s\n", strerror(errno));
		close(fd);
	}
	f = fopen("/sys/kernel/slab/kmalloc-4k/objects", "r");
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
		if (v >= 0) {
			*src = "/sys/kernel/slab/kmalloc-4k/objects (after shrink)";
			return v;
		}
	}
	f = fopen("/proc/slabinfo", "r");
	while (f && fgets(line, sizeof(line), f)) {
		long active;

		if (sscanf(line, "%63s %ld", name, &active) == 2 &&
		    !strcmp(name, "kmalloc-4k")) {
			v = active;
			*src = "/proc/slabinfo active_objs";
		}
	}
	if (f)
		fclose(f);
	return v;
}

/* Give this process its own unwind cache before the baseline. */
static void warm_own_cache(void)
{
	struct perf_event_attr attr;
	struct dc_ring r;
	struct dc_log log = { 0 };
	long t0 = now_ms();

	dc_attr_init(&attr, PERIOD_NS, true);
	if (dc_ring_open(&r, &attr, 0, -1, 8, 0))
		return;
	ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0);
	while (now_ms() - t0 < 3000) {
		spin_syscalls(1000);
		dc_ring_drain(&r, &log);
		if (log.nr_deferred)
			break;
	}
	dc_rings_close(&r, 1);
	dc_log_free(&log);
}

/* ---- the third session ---- */

struct third {
	bool open, cpu_wide;
	int n, kind_rounds[2], close_mode[2];
	long t_open, dur;
	pid_t target;
	struct dc_ring r[MAX_CPUS];
	int nr;
	struct sess S;
	struct fig f;
	size_t with_samples[2];
	uint64_t lost, open_done, close_start;
};

/*
 * A worker that ran lately (the latest of its samples in @hint), so that
 * a per-task third session is likely to sample it; else a random one.
 */
static pid_t running_worker(const struct sess *hint)
{
	for (size_t i = hint->ns, n = 0; i-- > 0 && n < 500; n++)
		for (int w = 0; w < NR_THREADS; w++)
			if (hint->s[i].tid == (uint32_t)shm->tids[w] && rnd(4))
				return shm->tids[w];
	return shm->tids[rnd(NR_THREADS)];
}

static void third_open(struct third *t, const struct sess *hint)
{
	t->cpu_wide = t->n & 1;
	memset(&t->S, 0, sizeof(t->S));
	t->S.name = t->cpu_wide ? "third (CPU-wide)" : "third (per-task)";
	if (t->cpu_wide) {
		open_rings(t->r, -1, true, false, THIRD_PAGES, 0);
		t->nr = nr_cpus;
	} else {
		struct perf_event_attr attr;
		int err;

		t->target = running_worker(hint);
		if (!t->target)
			return;
		dc_attr_init(&attr, PERIOD_NS, true);
		set_clock_lost(&attr);
		err = dc_ring_open(&t->r[0], &attr, t->target, -1, THIRD_PAGES, 0);
		if (err)
			ksft_exit_fail_msg("third per-task event on %d: %s\n",
					   t->target, strerror(-err));
		t->nr = 1;
	}
	if (dc_rings_ioctl(t->r, t->nr, PERF_EVENT_IOC_ENABLE))
		ksft_exit_fail_msg("enable: %s\n", strerror(errno));
	t->open_done = mono_ns();
	t->open = true;
	t->t_open = now_ms();
	t->dur = THIRD_MIN_MS + rnd(THIRD_MAX_MS - THIRD_MIN_MS + 1);
}

static void third_close(struct third *t)
{
	struct fig f = { 0 };
	int mode = (t->n >> 1) % 3;

	/*
	 * close_start: closed enabled, nothing is read after this drain, so
	 * the close begins before it; disabled first, before the disable
	 * (everything written until then is read by the drain after it).
	 */
	if (mode != 0)
		t->close_start = mono_ns();
	drain(&t->S, t->r, t->nr);
	if (mode == 0) {
		t->close_start = mono_ns();
		dc_rings_ioctl(t->r, t->nr, PERF_EVENT_IOC_DISABLE);
		drain(&t->S, t->r, t->nr);
	}
	/* Drops no lost record read so far reports, after each ring's last item. */
	for (int i = 0; i < t->nr; i++) {
		long long n = dc_ring_read_lost(&t->r[i], &t->S.tmp);

		if (n < 0)
			ksft_exit_fail_msg("third session %d: reading the lost count: %s\n",
					   t->n, strerror((int)-n));
	}
	compact(&t->S);
	if (mode == 0) {
		dc_rings_close(t->r, t->nr);
	} else {
		for (int i = 0; i < t->nr; i++) {
			if (mode == 1) {
				close(t->r[i].fd);
				dc_ring_unmap(&t->r[i]);
			} else {
				dc_ring_unmap(&t->r[i]);
				close(t->r[i].fd);
			}
		}
	}
	t->close_mode[mode != 0]++;
	/*
	 * Records are checked whole; samples of the child process only (its
	 * workers; the churned pids are known at the end).
	 */
	{
		static char ctx[128];

		snprintf(ctx, sizeof(ctx), "third session %d (%s, %s, %ld ms)", t->n,
			 t->cpu_wide ? "CPU-wide" : "per-task",
			 mode == 0 ? "disabled, then closed" :
			 mode == 1 ? "closed enabled, fd first" :
				     "closed enabled, ring first", now_ms() - t->t_open);
		third_ctx = ctx;
	}
	open_done = t->open_done;
	close_start = t->close_start;
	third_n = t->n;
	third_cpu_wide = t->cpu_wide;
	analyze(&t->S, CHILD, true, &f);
	if (t->S.lost)
		ksft_print_msg("third session %d lost %llu records (%llu PERF_RECORD_LOST)\n",
			       t->n, (unsigned long long)t->S.lost,
			       (unsigned long long)t->S.lost_records);
	t->lost += t->S.lost;
	t->with_samples[t->cpu_wide] += f.samples > 0;
	add_fig(&t->f, &f);
	t->kind_rounds[t->cpu_wide]++;
	sess_free(&t->S);
	t->open = false;
	t->n++;
}

/* ---- main ---- */

static void tiny(void)
{
	spin_syscalls(300);
	_exit(0);
}

static void print_fig(const char *name, const struct fig *f, const struct sess *S)
{
	ksft_print_msg("%s: samples %zu, records %zu, matched %zu, mismatched %zu (two records %zu, other tid %zu), orphaned %zu (%zu entries), records without a sample %zu, no cookie after the task's exit_group() %zu (the exit path on the kernel stack too: %zu) / without it %zu, bad records %zu (not MISC_USER or empty), with a kernel address %zu, with another non-user address %zu, lost %llu in %llu PERF_RECORD_LOST, malformed %llu\n",
		       name, f->samples, f->records, f->matched,
		       f->dup + f->tid_mismatch, f->dup, f->tid_mismatch,
		       f->orphans, f->orphan_cookies, f->rec_no_sample,
		       f->no_cookie_exit, f->no_cookie_kstack, f->no_cookie_bad,
		       f->bad_records, f->kaddr, f->nonuser,
		       (unsigned long long)S->lost,
		       (unsigned long long)S->lost_records,
		       (unsigned long long)S->malformed);
	ksft_print_msg("%s: excused %zu: final stop %zu (last cookie, get_signal on the stack, task_work already ran), a churned process's exit_group() entry on upstream C %zu in %zu entries (%s), a lost record in the entry's time %zu; other CPUs' samples skipped %zu\n",
		       name, f->final_stop + f->exit_c + f->lost_excused, f->final_stop,
		       f->exit_c, f->exit_c_entries,
		       is_c ? "allowed: C kernel, by the cookie of its exit_group() tracepoint sample" :
			      "none allowed on Rust",
		       f->lost_excused, f->foreign);
}

/*
 * The exit entries of the churned processes, and (a figure, not asserted)
 * how many have their record in each long-lived session: upstream C loses
 * it at exit.
 */
static void print_exits(const struct sess *task, const struct sess *cpu,
			const struct fig *tf, const struct fig *cf)
{
	size_t seen = 0, no_cookie = 0, in_task = 0, in_cpu = 0;

	for (size_t i = 0; i < exits.nr; i++) {
		const struct dc_tp_hit *x = &exits.v[i];
		uint64_t tmin = UINT64_MAX, tmax = 0;

		if (x->pid == (uint32_t)child_pid)
			continue;
		seen++;
		if (!x->cookie) {
			no_cookie++;
			continue;
		}
		in_task += find_times(task, x->pid, x->tid, x->cookie, &tmin, &tmax) > 0;
		in_cpu += find_times(cpu, x->pid, x->tid, x->cookie, &tmin, &tmax) > 0;
	}
	ksft_print_msg("exit_group() entries (the tracepoint's samples, %llu in all): %zu of the %d churned processes, %zu without a cookie; with their record: task %zu, cpu %zu; samples excused by them (upstream C only): task %zu in %zu entries, cpu %zu in %zu entries; tracepoint lost %llu in %llu PERF_RECORD_LOST, %llu records in its ring, malformed %llu\n",
		       (unsigned long long)exits.samples, seen, shm->nr_pids, no_cookie,
		       in_task, in_cpu, tf->exit_c, tf->exit_c_entries, cf->exit_c,
		       cf->exit_c_entries, (unsigned long long)exits.log.lost,
		       (unsigned long long)exits.log.lost_records,
		       (unsigned long long)exits.records,
		       (unsigned long long)exits.log.malformed);
}

int main(int argc, char **argv)
{
	struct dc_ring task_r[MAX_CPUS], cpu_r[MAX_CPUS], exit_r[MAX_CPUS];
	struct sess task_s = { .name = "task" }, cpu_s = { .name = "cpu" };
	struct fig tf = { 0 }, cf = { 0 };
	struct third third = { 0 };
	long dur_s, t0, t_stop = 0, k4k_base, k4k_end = -1, t_end, k4k_during = -1;
	const char *k4k_src = "none";
	int go[2], st = 0, tries = 0, err;
	bool stopped = false, capped = false;
	size_t drains = 0;

	if (argc == 2 && !strcmp(argv[1], "--tiny"))
		tiny();

	ksft_print_header();
	ksft_set_plan(8);
	if (dc_syms_load() || !(leaf_addr = dc_sym_addr("workload_leaf", &leaf_size)))
		ksft_exit_fail_msg("cannot read own symbol table\n");
	dc_kallsyms_load();
	is_c = !strcmp(dc_variant(), "c");
	dur_s = cmdline_int("stress_s", DEFAULT_S);
	if (getenv("STRESS_S"))
		dur_s = atoi(getenv("STRESS_S"));
	if (dur_s < 1)
		dur_s = 1;
	if (dur_s > 3600)
		dur_s = 3600;
	nr_cpus = dc_online_cpus(cpus, MAX_CPUS);
	if (nr_cpus < 1)
		ksft_exit_fail_msg("no online CPUs\n");
	rnd_state = getenv("STRESS_SEED") ? atoi(getenv("STRESS_SEED")) : (unsigned int)time(NULL);
	ksft_print_msg("%s kernel (variant on /proc/cmdline), %d CPUs, %d worker threads, %ld s (stress_s=), seed %u (STRESS_SEED), 10 kHz, rings of %d pages per CPU\n",
		       is_c ? "upstream C" : "Rust", nr_cpus, NR_THREADS, dur_s,
		       rnd_state, RING_PAGES);
	raise_paranoia_ok();

	shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED)
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
	memset(shm, 0, sizeof(*shm));

	warm_own_cache();
	k4k_base = k4k_read(&k4k_src);

	if (pipe(go))
		ksft_exit_fail_msg("pipe: %s\n", strerror(errno));
	child_pid = fork();
	if (child_pid < 0)
		ksft_exit_fail_msg("fork: %s\n", strerror(errno));
	if (child_pid == 0) {
		close(go[1]);
		child_main(go[0]);
	}
	close(go[0]);

	open_rings(task_r, child_pid, false, true, RING_PAGES, 0);
	open_rings(cpu_r, -1, true, false, RING_PAGES, 0);
	open_exit_rings(exit_r);
	if (dc_rings_ioctl(task_r, nr_cpus, PERF_EVENT_IOC_ENABLE) ||
	    dc_rings_ioctl(cpu_r, nr_cpus, PERF_EVENT_IOC_ENABLE) ||
	    dc_rings_ioctl(exit_r, nr_cpus, PERF_EVENT_IOC_ENABLE))
		ksft_exit_fail_msg("enable: %s\n", strerror(errno));
	if (write(go[1], "g", 1) != 1)
		ksft_exit_fail_msg("go: %s\n", strerror(errno));
	t0 = now_ms();
	t_end = t0 + dur_s * 1000;

	for (;;) {
		long now;
		pid_t w;

		usleep(DRAIN_MS * 1000);
		drain(&task_s, task_r, nr_cpus);
		drain(&cpu_s, cpu_r, nr_cpus);
		dc_tp_collect(exit_r, nr_cpus, &exits);
		drains++;
		now = now_ms();
		if (!shm->stop) {
			if (third.open) {
				drain(&third.S, third.r, third.nr);
				if (now - third.t_open >= third.dur)
					third_close(&third);
			} else if (now - t0 > 200) {
				third_open(&third, &task_s);
			}
		}
		if (!shm->stop && (now >= t_end || task_s.ns >= MAX_SAMPLES ||
				   cpu_s.ns >= MAX_SAMPLES)) {
			capped = now < t_end;
			if (third.open)
				third_close(&third);
			/* The workers' caches are there now: the check can see them. */
			if (k4k_base >= 0)
				k4k_during = k4k_read(&k4k_src);
			shm->stop = 1;
			t_stop = now;
		}
		if (!shm->stop)
			continue;
		w = waitpid(child_pid, &st, WUNTRACED | WNOHANG);
		if (w == child_pid && WIFSTOPPED(st)) {
			stopped = true;
			break;
		}
		if (w == child_pid || now - t_stop > STOP_TIMEOUT_MS)
			break;
	}
	dc_rings_ioctl(task_r, nr_cpus, PERF_EVENT_IOC_DISABLE);
	dc_rings_ioctl(cpu_r, nr_cpus, PERF_EVENT_IOC_DISABLE);
	err = dc_tp_finish(exit_r, nr_cpus, &exits);
	if (err)
		ksft_exit_fail_msg("reading the exit_group() tracepoint's lost counts: %s\n",
				   strerror(-err));
	drain(&task_s, task_r, nr_cpus);
	drain(&cpu_s, cpu_r, nr_cpus);
	/* Drops after a ring's last record: no PERF_RECORD_LOST reports them. */
	for (int i = 0; i < nr_cpus; i++) {
		long long a = dc_ring_read_lost(&task_r[i], &task_s.tmp);
		long long b = dc_ring_read_lost(&cpu_r[i], &cpu_s.tmp);

		if (a < 0 || b < 0)
			ksft_exit_fail_msg("reading the lost counts: %s\n",
					   strerror((int)-(a < 0 ? a : b)));
	}
	compact(&task_s);
	compact(&cpu_s);
	dc_rings_close(task_r, nr_cpus);
	dc_rings_close(cpu_r, nr_cpus);
	kill(child_pid, SIGKILL);
	waitpid(child_pid, NULL, 0);
	ksft_print_msg("ran %ld ms (%s), stopped in %ld ms more, %zu reads; child: %ld migrations (%ld failed), %ld forks, %ld execs, %ld exits reaped, %d processes churned (cap %d), fork failures %ld\n",
		       t_stop - t0, capped ? "sample cap reached" : "duration",
		       now_ms() - t_stop, drains, shm->migrations, shm->migrate_fail,
		       shm->forks, shm->execs, shm->exits, shm->nr_pids, MAX_PIDS,
		       shm->churn_fail);
	if (!stopped)
		ksft_exit_fail_msg("the child did not stop itself (status %#x)\n", st);

	build_tree();
	keep_tree_exits();
	analyze(&task_s, ALL, false, &tf);
	analyze(&cpu_s, TREE, false, &cf);
	judge_cands(&task_s, &cpu_s, &third.f);
	print_fig("task (inherited per-task)", &tf, &task_s);
	print_fig("cpu (CPU-wide)", &cf, &cpu_s);
	print_exits(&task_s, &cpu_s, &tf, &cf);
	ksft_print_msg("third sessions: %d per-task + %d CPU-wide (%zu / %zu with samples of the child), %d disabled before the close, %d closed enabled: samples %zu, records %zu, matched %zu, mismatched %zu, orphaned without evidence %zu (%zu entries), excused %zu: by their record's time in the long-lived sessions, written after the close began %zu samples (%zu entries), before the session was open on every CPU %zu (%zu entries); by a lost record of the session in the entry's time %zu; bad records %zu, no cookie before its task's exit_group() %zu, lost %llu\n",
		       third.kind_rounds[0], third.kind_rounds[1],
		       third.with_samples[0], third.with_samples[1],
		       third.close_mode[0], third.close_mode[1], third.f.samples,
		       third.f.records, third.f.matched,
		       third.f.dup + third.f.tid_mismatch, third.f.orphans,
		       third.f.orphan_cookies,
		       third.f.at_close + third.f.before_open + third.f.lost_excused,
		       third.f.at_close, third.f.close_entries, third.f.before_open,
		       third.f.open_entries, third.f.lost_excused,
		       third.f.bad_records, third.f.no_cookie_bad,
		       (unsigned long long)third.lost);

	ksft_test_result(tf.samples >= MIN_SAMPLES && !tf.orphans && !tf.no_cookie_bad,
			 "task session: all %zu samples have their record (%zu matched) except %zu excused (final stop %zu, exit_group() entry on C %zu, a lost record in the entry's time %zu); %zu orphaned without evidence, %zu without a cookie before its task's exit_group()\n",
			 tf.samples, tf.matched, tf.final_stop + tf.exit_c + tf.lost_excused,
			 tf.final_stop, tf.exit_c, tf.lost_excused, tf.orphans,
			 tf.no_cookie_bad);
	ksft_test_result(cf.samples >= MIN_SAMPLES && !cf.orphans && !cf.no_cookie_bad,
			 "cpu session: all %zu samples of the child's tree have their record (%zu matched) except %zu excused (final stop %zu, exit_group() entry on C %zu, a lost record in the entry's time %zu); %zu orphaned without evidence, %zu without a cookie before its task's exit_group()\n",
			 cf.samples, cf.matched, cf.final_stop + cf.exit_c + cf.lost_excused,
			 cf.final_stop, cf.exit_c, cf.lost_excused, cf.orphans,
			 cf.no_cookie_bad);
	ksft_test_result(!tf.bad_records && !cf.bad_records && !third.f.bad_records &&
			 !tf.kaddr && !cf.kaddr && !third.f.kaddr &&
			 (is_c || (!tf.nonuser && !cf.nonuser && !third.f.nonuser)) &&
			 !tf.dup && !cf.dup && !third.f.dup && !tf.tid_mismatch &&
			 !cf.tid_mismatch && !third.f.tid_mismatch && !task_s.malformed &&
			 !cpu_s.malformed && !exits.log.malformed,
			 "records: no kernel address (%zu), MISC_USER and non-empty (%zu bad), %zu with another non-user address (%s), one per tid and cookie (%zu twice), no sample with another tid's cookie (%zu), %llu malformed\n",
			 tf.kaddr + cf.kaddr + third.f.kaddr,
			 tf.bad_records + cf.bad_records + third.f.bad_records,
			 tf.nonuser + cf.nonuser + third.f.nonuser,
			 is_c ? "upstream C records a non-user return address, docs/deviations.md" :
				"none allowed on Rust",
			 tf.dup + cf.dup + third.f.dup,
			 tf.tid_mismatch + cf.tid_mismatch + third.f.tid_mismatch,
			 (unsigned long long)(task_s.malformed + cpu_s.malformed +
					      exits.log.malformed));
	ksft_test_result(tf.leaf + cf.leaf >= MIN_LEAF && !tf.leaf_bad && !cf.leaf_bad &&
			 !third.f.leaf_bad,
			 "records in workload_leaf are exactly the workload's chain down to thread_main <- start_thread: %zu + %zu (>= %d), %zu wrong\n",
			 tf.leaf, cf.leaf, MIN_LEAF,
			 tf.leaf_bad + cf.leaf_bad + third.f.leaf_bad);
	/*
	 * The rings are sized and read so that nothing is lost: a lost
	 * record (or a drop no record reported) fails, whatever it explains.
	 */
	ksft_test_result(!task_s.lost && !cpu_s.lost && !task_s.lost_records &&
			 !cpu_s.lost_records && !exits.log.lost && !exits.log.lost_records,
			 "no record lost in the long-lived sessions (rings of %d pages per CPU, read every %d ms): task %llu lost in %llu PERF_RECORD_LOST, cpu %llu in %llu (counted by the events: PERF_FORMAT_LOST); %zu + %zu orphan samples explained by them; no sample of the exit_group() tracepoint lost: %llu in %llu\n",
			 RING_PAGES, DRAIN_MS, (unsigned long long)task_s.lost,
			 (unsigned long long)task_s.lost_records,
			 (unsigned long long)cpu_s.lost,
			 (unsigned long long)cpu_s.lost_records, tf.lost_excused,
			 cf.lost_excused, (unsigned long long)exits.log.lost,
			 (unsigned long long)exits.log.lost_records);
	ksft_test_result(shm->migrations > 0 && shm->forks > 0 && shm->execs > 0 &&
			 third.with_samples[0] > 0 && third.with_samples[1] > 0 &&
			 !third.f.orphans && !third.f.no_cookie_bad,
			 "stress happened: %ld migrations, %ld forks, %ld execs, third sessions with child samples %zu per-task + %zu CPU-wide; third sessions: %zu orphaned without evidence (their record's time in the long-lived sessions outside the open and close, or a lost record)\n",
			 shm->migrations, shm->forks, shm->execs,
			 third.with_samples[0], third.with_samples[1], third.f.orphans);
	ksft_test_result(shm->exits >= (long)shm->nr_pids && shm->nr_pids > 0,
			 "every churned process reaped: %ld of %d\n", shm->exits,
			 shm->nr_pids);

	sess_free(&task_s);
	sess_free(&cpu_s);

	/* Every task of the child is gone: its caches go with RCU frees. */
	if (k4k_base < 0) {
		ksft_test_result_skip("kmalloc-4k object count not available (no /sys/kernel/slab/kmalloc-4k, no /proc/slabinfo: SLUB_TINY kernel)\n");
	} else {
		long tasks = NR_THREADS + 3 + shm->nr_pids;

		for (tries = 1; tries <= 10; tries++) {
			usleep(500000);
			k4k_end = k4k_read(&k4k_src);
			ksft_print_msg("kmalloc-4k: baseline %ld, after %d x 0.5 s: %ld (%+ld)\n",
				       k4k_base, tries, k4k_end, k4k_end - k4k_base);
			if (k4k_end >= 0 && labs(k4k_end - k4k_base) <= SLAB_TOL)
				break;
		}
		ksft_test_result(k4k_end >= 0 && labs(k4k_end - k4k_base) <= SLAB_TOL &&
				 k4k_during - k4k_base >= NR_THREADS / 2,
				 "kmalloc-4k objects back to the baseline within %d after the child's %ld tasks are gone: %ld, %ld at the end of the run (+%ld, >= %d: the workers' caches), %ld after (%s)\n",
				 SLAB_TOL, tasks, k4k_base, k4k_during,
				 k4k_during - k4k_base, NR_THREADS / 2, k4k_end, k4k_src);
	}
	free(tree);
	free(cands);
	dc_tp_free(&exits);
	dc_finished();
}
