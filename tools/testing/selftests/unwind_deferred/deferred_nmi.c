// SPDX-License-Identifier: GPL-2.0
/*
 * Deferred unwind requests from NMI, hardirq and task context, through the
 * test driver of CONFIG_UNWIND_DEFERRED_TEST (kernel/unwind/test_deferred.c,
 * debugfs unwind_deferred_test/).  With a hardware PMU every perf sample is
 * an NMI; QEMU's TCG has none, so the driver sends real NMIs through the
 * local APIC to the CPU this thread runs on (from that CPU's timer
 * interrupt, where the NMI nests in an interrupt that may itself be making
 * a request, or from the other CPU, hitting the thread in user mode or in
 * a system call), and requests from hrtimers and from the thread's own
 * system calls.  Its callbacks log what they get; this program checks it.
 *
 *  1. registration: BITS_PER_LONG - 2 bits minus perf's one, then -EBUSY;
 *     a cancelled bit is reused; register/cancel in a loop leaks no bit;
 *  2. NMI and IRQ requests in user mode and in system calls, several
 *     tracers: one cookie per kernel entry, each tracer's callback called
 *     exactly once per entry with that cookie and the exact user stack;
 *     "already requested" is exactly 1; interrupts are enabled after
 *     requests in task context and were never enabled in NMI or IRQ;
 *     callbacks run in task context, in a fixed order;
 *  3. the same under an NMI storm (both CPUs, every 50 us) while the
 *     thread also requests in a loop from task context;
 *  4. a callback requesting another tracer (from the task_work): that one
 *     gets the same cookie and trace, once, and no callback runs twice;
 *  5. cancel racing requests, pending task_work and running (sleeping)
 *     callbacks, with the freed bits reused at once: no callback after its
 *     cancel returned, no call of a work for a request it did not make;
 *     and a cancel while a request of its work is queued (made in a long
 *     system call): that request is never called back;
 *  6. 4 with the requests made from an NMI while the task_work runs: the
 *     first tracer's callback sends an NMI to its own CPU and waits for
 *     it; the NMI asks for the chained tracer (0: queued, then called
 *     once, same cookie and trace), for it again (1) and for the tracer
 *     whose callback is running (1: already called, never again);
 *  7. the same from an NMI after the unwinder's task_work, on the way
 *     back to user space: the callback queues a task_work of the driver's,
 *     which runs after the unwinder's and sends the NMI (the chained
 *     tracer's callback then comes in one more task_work, before the
 *     return: the same entry, the same cookie);
 *  8. 2 with all 61 tracers registered and requesting (every bit but
 *     perf's): the driver stops requesting while its logs are near full
 *     (counted as throttled), so the run is short.
 *
 * Every request's context is the kernel's own word (in_nmi() and
 * in_hardirq(), logged by the driver), checked against where the driver
 * made it, and each test requires the contexts it is about.
 *
 * Entries are named independently of the cookie under test: the driver
 * labels each "spin" system call, each timer interrupt from user mode
 * (with the NMI it sends to itself) and each NMI from user mode.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../kselftest.h"
#include "dc_util.h"

#define DIR		"/sys/kernel/debug/unwind_deferred_test"
#define NR_TRACERS	40	/* bits above 31 too */
#define MASK		0xc000000007ULL	/* slots 0, 1, 2, 38, 39 */
#define ALL_TRACERS	61	/* BITS_PER_LONG - 2, less perf's */
#define CHAIN_TO	20	/* requested only by slot 0's callback */
#define MAX_REQ		(1 << 18)
#define MAX_CB		(1 << 14)

#define LABEL_KIND(l)	((l) >> 28)
enum { L_NONE, L_SPIN, L_IRQ, L_NMI };

struct req {
	uint32_t tid, cpu, user, label, slot, gen, rep, nmi, hardirq;
	int ret;
	char ctx;
	uint64_t cookie;
};

struct cb {
	uint32_t tid, cpu, slot, gen, flags, nr;
	uint64_t cookie;
	uint64_t ips[32];
};

static struct req *reqs;
static struct cb *cbs;
static size_t nr_req, nr_cb, malformed;
static int ctl = -1;
static bool is_rust;
/* The tracers registered and the ones that request (test 8: all). */
static int nr_tracers = NR_TRACERS;
static uint64_t req_mask = MASK;
static int bit_of_slot[64];
static uint32_t gen_of_slot[64];

/* ---- the driver ---- */

/* A command to the driver on this program's ctl file: 0 or -errno. */
#define cmd(...)	dc_udt_cmd(ctl, __VA_ARGS__)

static FILE *open_file(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), DIR "/%s", name);
	return fopen(path, "r");
}

static long stat_of(const char *name)
{
	FILE *f = open_file("stats");
	char key[64], val[64];
	long v = -1;

	if (!f)
		return -1;
	while (fscanf(f, "%63s %63s", key, val) == 2)
		if (!strcmp(key, name))
			v = strtol(val, NULL, 0);
	fclose(f);
	return v;
}

static bool read_impl(void)
{
	FILE *f = open_file("stats");
	char key[64], val[64];
	bool rust = false, found = false;

	while (f && fscanf(f, "%63s %63s", key, val) == 2)
		if (!strcmp(key, "impl")) {
			rust = !strcmp(val, "rust");
			found = true;
		}
	if (f)
		fclose(f);
	/* Fail closed (the C rules are the looser ones), and agree. */
	if (!found || rust != dc_rust_kernel())
		ksft_exit_fail_msg("the driver's impl (%s) does not tell this kernel apart, or disagrees with /proc/kallsyms\n",
				   found ? (rust ? "rust" : "c") : "missing");
	return rust;
}

/* Slot -> bit and generation of the registered tracers; their number. */
static int read_tracers(void)
{
	FILE *f = open_file("tracers");
	int slot, bit, n = 0;
	unsigned int gen;

	memset(bit_of_slot, -1, sizeof(bit_of_slot));
	memset(gen_of_slot, 0, sizeof(gen_of_slot));
	while (f && fscanf(f, " T %d %u %d", &slot, &gen, &bit) == 3) {
		if (slot >= 0 && slot < 64) {
			bit_of_slot[slot] = bit;
			gen_of_slot[slot] = gen;
			n++;
		}
	}
	if (f)
		fclose(f);
	return n;
}

static void read_logs(void)
{
	FILE *f = open_file("requests");
	char line[1024];

	nr_req = nr_cb = malformed = 0;
	if (!f)
		ksft_exit_fail_msg("%s/requests: %s\n", DIR, strerror(errno));
	while (fgets(line, sizeof(line), f) && nr_req < MAX_REQ) {
		struct req *r = &reqs[nr_req];
		unsigned long long c;

		if (sscanf(line, "R %u %u %c %u %x %u %u %u %d %llx %u %u",
			   &r->tid, &r->cpu, &r->ctx, &r->user, &r->label,
			   &r->slot, &r->gen, &r->rep, &r->ret, &c, &r->nmi,
			   &r->hardirq) == 12) {
			r->cookie = c;
			nr_req++;
		} else if (malformed++ < 3) {
			ksft_print_msg("malformed request line: %s", line);
		}
	}
	if (f)
		fclose(f);
	f = open_file("callbacks");
	while (f && fgets(line, sizeof(line), f) && nr_cb < MAX_CB) {
		struct cb *c = &cbs[nr_cb];
		unsigned long long cookie;
		char *p = line;
		int used;

		if (sscanf(p, "C %u %u %u %u %x %llx %u%n", &c->tid, &c->cpu,
			   &c->slot, &c->gen, &c->flags, &cookie, &c->nr,
			   &used) != 7)
			continue;
		p += used;
		c->cookie = cookie;
		for (uint32_t i = 0; i < c->nr && i < 32; i++) {
			unsigned long long ip;

			if (sscanf(p, " %llx%n", &ip, &used) != 1)
				break;
			c->ips[i] = ip;
			p += used;
		}
		nr_cb++;
	}
	if (f)
		fclose(f);
}

/* ---- the target thread's code: known user call chains ---- */

#define NO_TAIL() asm volatile("" ::: "memory")

static volatile uint64_t sink;

static uint64_t thread_cpu_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (uint64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Pure user-mode work: where NMIs and timers hit the thread in user mode. */
__attribute__((noinline)) void user_leaf(unsigned int iters)
{
	uint64_t x = sink;

	DC_KEEP_FRAME();
	for (unsigned int i = 0; i < iters; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	sink = x;
}

__attribute__((noinline)) void user_phase(unsigned int iters)
{
	user_leaf(iters);
	NO_TAIL();
}

/*
 * A system call in which the kernel busy-waits: requests hit it there.
 * Written to the thread's own open file of ctl: writes to one open file
 * are serialised (f_pos_lock), so a spin on the main thread's file would
 * hold off its cancels until the spin ends.
 */
__attribute__((noinline)) void spin_leaf(int fd, const char *buf)
{
	DC_KEEP_FRAME();
	dc_syscall3(__NR_write, fd, (long)buf, strlen(buf));
}

__attribute__((noinline)) void kernel_phase(int fd, const char *buf)
{
	spin_leaf(fd, buf);
	NO_TAIL();
}

/*
 * Whole records: the walk ends at start_thread, as for every thread of
 * these static binaries (see DC_THREAD_FRAMES in dc_util.h).
 */
static const char *const user_chain[] = {
	"user_leaf", "user_phase", "target_loop", "target_main", "start_thread"
};
static const char *const spin_chain[] = {
	"spin_leaf", "kernel_phase", "target_loop", "target_main", "start_thread"
};
#define NR_CHAIN 5

struct target_arg {
	unsigned int ms;	/* CPU time to run */
	const char *spin;	/* the "spin" command */
	int fd;			/* its own open file of ctl */
	volatile int tid;
	volatile int go, done, release;
};

/* Alternate user-mode work and spin system calls for arg->ms of CPU. */
__attribute__((noinline)) void target_loop(struct target_arg *a)
{
	uint64_t end = thread_cpu_ms() + a->ms;

	do {
		user_phase(200000);
		kernel_phase(a->fd, a->spin);
	} while (thread_cpu_ms() < end);
	NO_TAIL();
}

static void *target_main(void *p)
{
	struct target_arg *a = p;

	a->fd = open(DIR "/ctl", O_WRONLY);
	if (a->fd < 0)
		ksft_exit_fail_msg("%s: %s\n", DIR "/ctl", strerror(errno));
	a->tid = gettid();
	while (!a->go)
		;
	target_loop(a);
	a->done = 1;
	/* Exit (where requests fail: PF_EXITING) only once disarmed. */
	while (!a->release)
		;
	/* Closing a ctl file disarms the driver: it is disarmed already. */
	close(a->fd);
	return NULL;
}

/* ---- checks ---- */

static bool user_addrs_only(const struct cb *c)
{
	for (uint32_t i = 0; i < c->nr && i < 32; i++)
		if (c->ips[i] >= DC_USER_MAX)
			return false;
	return true;
}

/* 1 exact (the whole record, with its length), 0 wrong, -1 not in @leaf. */
static int check_stack(const struct cb *c, const char *const *chain, int n)
{
	struct dc_deferred d = { .nr = c->nr };
	bool frameless;

	memcpy(d.ips, c->ips, sizeof(c->ips));
	if (d.nr > 32)
		d.nr = 32;
	return dc_check_leaf_record(&d, chain[0], chain, n, &frameless);
}

/*
 * A user-mode entry that interrupted a function outside the chains (libc's
 * strlen() called by spin_leaf, the vDSO's clock_gettime): the record
 * must end with a chain's whole tail, from the first of its frames that
 * is a chain function (that function's frame may be skipped: the
 * interrupted function has no frame pointer of its own).  1 exact, 0 not.
 */
static int check_tail(const struct cb *c)
{
	uint32_t nr = c->nr < 32 ? c->nr : 32;
	uint64_t off;

	for (uint32_t k = 1; k < nr; k++) {
		const char *f = dc_sym(c->ips[k] - 1, &off);

		for (int p = 0; f && p < NR_CHAIN; p++) {
			const char *const *ch = !strcmp(f, user_chain[p]) ? user_chain :
						!strcmp(f, spin_chain[p]) ? spin_chain : NULL;

			if (!ch)
				continue;
			if (nr - k != (uint32_t)(NR_CHAIN - p) || c->nr > 32)
				return 0;
			for (uint32_t j = k + 1; j < nr; j++) {
				f = dc_sym(c->ips[j] - 1, &off);
				if (!f || strcmp(f, ch[p + j - k]))
					return 0;
			}
			return 1;
		}
	}
	return 0;
}

/* ---- sorted views, so that 10^5 records check in O(n log n) ---- */

static int cmp_u64(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

/* Requests and callbacks by (tid, slot, gen, cookie). */
static int req_key_cmp(const void *x, const void *y)
{
	const struct req *a = x, *b = y;

	return cmp_u64(a->tid, b->tid) ?: cmp_u64(a->slot, b->slot) ?:
	       cmp_u64(a->gen, b->gen) ?: cmp_u64(a->cookie, b->cookie);
}

static int cb_key_cmp(const void *x, const void *y)
{
	const struct cb *a = x, *b = y;

	return cmp_u64(a->tid, b->tid) ?: cmp_u64(a->slot, b->slot) ?:
	       cmp_u64(a->gen, b->gen) ?: cmp_u64(a->cookie, b->cookie);
}

static int cb_req_cmp(const struct cb *a, const struct req *b)
{
	return cmp_u64(a->tid, b->tid) ?: cmp_u64(a->slot, b->slot) ?:
	       cmp_u64(a->gen, b->gen) ?: cmp_u64(a->cookie, b->cookie);
}

static int req_label_cmp(const void *x, const void *y)
{
	const struct req *a = x, *b = y;

	return cmp_u64(a->label, b->label) ?: cmp_u64(a->cookie, b->cookie);
}

static int req_cookie_cmp(const void *x, const void *y)
{
	const struct req *a = x, *b = y;

	return cmp_u64(a->cookie, b->cookie) ?: cmp_u64(b->label, a->label);
}

static int cb_cookie_cmp(const void *x, const void *y)
{
	const struct cb *a = x, *b = y;

	return cmp_u64(a->cookie, b->cookie);
}

static struct req *by_cookie;	/* this thread's requests, by cookie */
static size_t nr_by_cookie;

/* The label of a cookie (0 if none of its requests had one). */
static uint32_t label_of(uint64_t cookie)
{
	size_t lo = 0, hi = nr_by_cookie;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (by_cookie[mid].cookie < cookie)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Sorted with labelled requests first within a cookie. */
	return lo < nr_by_cookie && by_cookie[lo].cookie == cookie ?
	       by_cookie[lo].label : 0;
}

struct verdict {
	size_t c_ret_bit;	/* upstream C: first request returned its bit */
	size_t bad_ret, bad_rep, zero_cookie, label_split, label_shared;
	size_t missing, dup, unrequested, bad_flags, kernel_addr;
	size_t trace_differs, bad_order, user_exact, user_bad, user_elsewhere, spin_exact;
	size_t spin_bad, cookies, after_cancel_cb;
	/* Requests by the context the kernel said it was in (in_nmi(),
	 * in_hardirq()); a request whose context disagrees with where the
	 * driver made it (ctx). */
	size_t in_nmi, in_irq, in_task, ctx_wrong;
	size_t max_nmi_per_entry;	/* NMI requests with one cookie */
};

/*
 * Check the logs of one run for thread @tid.  @exact_once: every
 * (tracer, cookie) that was requested has exactly one callback (else at
 * most one: tracers cancelled during the run).
 */
static void check_run(uint32_t tid, struct verdict *v,
		      bool (*exact_once)(uint32_t slot, uint32_t gen))
{
	struct req *rq = calloc(nr_req + 1, sizeof(*rq));
	struct cb *cq = calloc(nr_cb + 1, sizeof(*cq));
	size_t n = 0, m = 0, i, j, k;

	memset(v, 0, sizeof(*v));
	if (!rq || !cq)
		ksft_exit_fail_msg("out of memory\n");

	/* Order within one task_work (log order): bit order (Rust), or
	 * newest registration first (upstream C walks its list from the
	 * head).  The chained tracer comes in a second task_work. */
	for (i = 1; i < nr_cb; i++) {
		const struct cb *a = &cbs[i - 1], *b = &cbs[i];

		if (a->tid != tid || b->tid != tid || a->cookie != b->cookie ||
		    b->slot == CHAIN_TO || a->slot >= 64 || b->slot >= 64 ||
		    gen_of_slot[a->slot] != a->gen ||
		    gen_of_slot[b->slot] != b->gen)
			continue;
		if (is_rust ? bit_of_slot[a->slot] >= bit_of_slot[b->slot] :
			      a->gen <= b->gen)
			v->bad_order++;
	}

	for (i = 0; i < nr_req; i++) {
		const struct req *r = &reqs[i];

		uint32_t u = (uint32_t)r->ret;

		if (r->tid != tid)
			continue;
		rq[n] = *r;
		/*
		 * Upstream C returns "old & bit" when an NMI request of the same
		 * work set the bit between its read and its fetch_or: the bit
		 * value (0 above bit 31), not 1.  The request is an "already
		 * requested" one; counted and printed, C only.
		 */
		if (!is_rust && r->rep == 0 && u > 1 && !(u & (u - 1))) {
			v->c_ret_bit++;
			rq[n].ret = 1;
		}
		if (rq[n].ret < 0 || rq[n].ret > 1)
			v->bad_ret++;
		if (r->rep == 1 && r->ret != 1)
			v->bad_rep++;
		if (!r->cookie)
			v->zero_cookie++;
		/* An NMI counts as a hardirq too (nmi_enter()). */
		if (r->nmi && r->hardirq && (r->ctx == 'N' || r->ctx == 'M'))
			v->in_nmi++;
		else if (!r->nmi && r->hardirq && r->ctx == 'I')
			v->in_irq++;
		else if (!r->nmi && !r->hardirq && (r->ctx == 'T' || r->ctx == 'W'))
			v->in_task++;
		else
			v->ctx_wrong++;
		n++;
	}
	for (i = 0; i < nr_cb; i++)
		if (cbs[i].tid == tid)
			cq[m++] = cbs[i];

	/* Labels and cookies name the same entries, both ways. */
	qsort(rq, n, sizeof(*rq), req_label_cmp);
	for (i = 1; i < n; i++)
		if (rq[i].label && rq[i].label == rq[i - 1].label &&
		    rq[i].cookie != rq[i - 1].cookie)
			v->label_split++;
	qsort(rq, n, sizeof(*rq), req_cookie_cmp);
	for (i = 0, k = 0; i < n; i++) {
		size_t nmis = 0;

		if (!i || rq[i].cookie != rq[i - 1].cookie) {
			v->cookies++;
			for (k = i; k < n && rq[k].cookie == rq[i].cookie; k++)
				nmis += rq[k].ctx == 'N';
			if (nmis > v->max_nmi_per_entry)
				v->max_nmi_per_entry = nmis;
		}
		else if (rq[i].label && rq[i - 1].label &&
			 rq[i].label != rq[i - 1].label)
			v->label_shared++;
	}
	free(by_cookie);
	by_cookie = calloc(n + 1, sizeof(*rq));
	if (!by_cookie)
		ksft_exit_fail_msg("out of memory\n");
	memcpy(by_cookie, rq, n * sizeof(*rq));
	nr_by_cookie = n;

	/* Each callback: its context, addresses, and the stack by entry kind. */
	for (i = 0; i < m; i++) {
		const struct cb *c = &cq[i];
		uint32_t kind = LABEL_KIND(label_of(c->cookie));
		int ok;

		if (c->flags & 4)
			v->after_cancel_cb++;
		if (c->flags & 3)
			v->bad_flags++;
		if (!user_addrs_only(c))
			v->kernel_addr++;
		if (kind == L_SPIN) {
			ok = check_stack(c, spin_chain, NR_CHAIN);
			v->spin_exact += ok == 1;
			v->spin_bad += ok != 1;
		} else if (kind == L_IRQ || kind == L_NMI) {
			/*
			 * Mostly in user_leaf; else in one of its callers, or
			 * in spin_leaf before its system call: the chain from
			 * that function, whole.  Elsewhere (the vDSO's
			 * clock_gettime, libc's strlen): a chain's whole tail.
			 */
			ok = -1;
			for (int p = 0; p < NR_CHAIN && ok < 0; p++) {
				ok = check_stack(c, user_chain + p, NR_CHAIN - p);
				if (ok < 0 && p < 2)
					ok = check_stack(c, spin_chain + p, NR_CHAIN - p);
			}
			if (ok < 0) {
				ok = check_tail(c);
				v->user_elsewhere += ok == 1;
			}
			v->user_exact += ok == 1;
			v->user_bad += ok != 1;
		} else {
			continue;
		}
		if (ok != 1 && v->spin_bad + v->user_bad == 1) {
			ksft_print_msg("first wrong stack (%s, %u entries):\n",
				       kind == L_SPIN ? "spin" : "user mode", c->nr);
			for (uint32_t k = 0; k < c->nr && k < 32; k++) {
				uint64_t off;
				const char *n = dc_sym(k ? c->ips[k] - 1 : c->ips[k], &off);

				ksft_print_msg("  %#llx %s\n", (unsigned long long)c->ips[k],
					       n ? n : "?");
			}
		}
	}

	/* All callbacks of one cookie got the same trace. */
	qsort(cq, m, sizeof(*cq), cb_cookie_cmp);
	for (i = 0, j = 0; i < m; i++) {
		if (cq[i].cookie != cq[j].cookie)
			j = i;
		else if (cq[i].nr != cq[j].nr ||
			 memcmp(cq[i].ips, cq[j].ips,
				(cq[i].nr < 32 ? cq[i].nr : 32) * 8))
			v->trace_differs++;
	}

	/* Merge the (tracer, cookie) groups: exactly one callback for each
	 * request group, none without one. */
	qsort(rq, n, sizeof(*rq), req_key_cmp);
	qsort(cq, m, sizeof(*cq), cb_key_cmp);
	for (i = 0, j = 0; i < n; i = k) {
		bool any_ok = false;
		int calls = 0;

		for (k = i; k < n && !req_key_cmp(&rq[k], &rq[i]); k++)
			any_ok |= rq[k].ret >= 0;
		while (j < m && cb_req_cmp(&cq[j], &rq[i]) < 0) {
			v->unrequested++;
			ksft_print_msg("callback of slot %u gen %u cookie %#llx without a request\n",
				       cq[j].slot, cq[j].gen,
				       (unsigned long long)cq[j].cookie);
			j++;
		}
		while (j < m && !cb_req_cmp(&cq[j], &rq[i])) {
			calls++;
			j++;
		}
		if (!any_ok) {
			v->unrequested += calls;
			continue;
		}
		if (calls > 1)
			v->dup++;
		if (!calls && exact_once(rq[i].slot, rq[i].gen)) {
			v->missing++;
			ksft_print_msg("no callback: slot %u gen %u cookie %#llx ctx %c label %#x\n",
				       rq[i].slot, rq[i].gen,
				       (unsigned long long)rq[i].cookie,
				       rq[i].ctx, rq[i].label);
		}
	}
	for (; j < m; j++) {
		v->unrequested++;
		ksft_print_msg("callback of slot %u gen %u cookie %#llx without a request\n",
			       cq[j].slot, cq[j].gen,
			       (unsigned long long)cq[j].cookie);
	}
	free(rq);
	free(cq);
}

static bool always(uint32_t slot __attribute__((unused)),
		   uint32_t gen __attribute__((unused)))
{
	return true;
}

static void print_verdict(const char *what, const struct verdict *v)
{
	ksft_print_msg("%s: %zu requests, %zu callbacks, %zu cookies; "
		       "C first request returned its bit %zu; "
		       "bad ret %zu, repeat!=1 %zu, zero cookie %zu, "
		       "label split %zu, label shared %zu, missing %zu, dup %zu, "
		       "unrequested %zu, bad ctx %zu, kernel addr %zu, "
		       "trace differs %zu, order %zu, after cancel %zu; stacks: "
		       "user exact %zu (%zu of them in libc or the vDSO) bad %zu, syscall exact %zu bad %zu; "
		       "requests in_nmi() %zu, in_hardirq() alone %zu, task %zu, context wrong %zu, malformed lines %zu\n",
		       what, nr_req, nr_cb, v->cookies, v->c_ret_bit,
		       v->bad_ret, v->bad_rep,
		       v->zero_cookie, v->label_split, v->label_shared,
		       v->missing, v->dup, v->unrequested, v->bad_flags,
		       v->kernel_addr, v->trace_differs, v->bad_order,
		       v->after_cancel_cb, v->user_exact, v->user_elsewhere,
		       v->user_bad, v->spin_exact, v->spin_bad, v->in_nmi,
		       v->in_irq, v->in_task, v->ctx_wrong, malformed);
}

static bool verdict_clean(const struct verdict *v)
{
	return !v->bad_ret && !v->bad_rep && !v->zero_cookie &&
	       !v->label_split && !v->label_shared && !v->missing &&
	       !v->dup && !v->unrequested && !v->bad_flags &&
	       !v->kernel_addr && !v->trace_differs && !v->bad_order &&
	       !v->after_cancel_cb && !v->user_bad && !v->spin_bad &&
	       !v->ctx_wrong && !malformed;
}

static bool stats_clean(void)
{
	static const char *const zero[] = {
		"req_lost", "cb_lost", "after_cancel",
		"irqs_off_after_request", "irqs_on_in_irq",
	};
	bool ok = true;

	for (size_t i = 0; i < sizeof(zero) / sizeof(zero[0]); i++) {
		long n = stat_of(zero[i]);

		if (n != 0) {
			ksft_print_msg("stats: %s = %ld, want 0\n", zero[i], n);
			ok = false;
		}
	}
	return ok;
}

/* ---- tests ---- */

static int register_range(int from, int to)
{
	for (int s = from; s < to; s++) {
		int r = cmd("register %d", s);

		if (r)
			return r;
	}
	return 0;
}

static void cancel_all(void)
{
	for (int s = 0; s < 64; s++)
		cmd("cancel %d", s);
}

static void test_registration(void)
{
	int n = 0, err = 0, bit5, ours = 0, leaked = 0;
	bool bits_ok = true;
	uint64_t seen = 0;

	cmd("reset");
	cancel_all();
	for (int s = 0; s < 64 && !err; s++) {
		err = cmd("register %d", s);
		n += !err;
	}
	read_tracers();
	for (int s = 0; s < 64; s++) {
		int b = bit_of_slot[s];

		if (b < 0)
			continue;
		ours++;
		if (b < 2 || b > 63 || (seen & (1ULL << b))) {
			bits_ok = false;
			continue;
		}
		seen |= 1ULL << b;
	}
	bit5 = bit_of_slot[5];
	/* BITS_PER_LONG - 2 usable bits, one of them perf's. */
	ksft_print_msg("registered %d tracers, then error %d; bits distinct in [2, 63]: %s, free bits left: %d\n",
		       n, err, bits_ok ? "yes" : "no",
		       __builtin_popcountll(~seen & ~3ULL));
	if (cmd("cancel 5") || cmd("register 5") || read_tracers() != n ||
	    bit_of_slot[5] != bit5) {
		ksft_print_msg("slot 5: bit %d, then %d after cancel+register\n",
			       bit5, bit_of_slot[5]);
		bits_ok = false;
	}
	/* Register and cancel in a loop: no bit leaks. */
	cancel_all();
	for (int i = 0; i < 200; i++)
		if (cmd("register 0") || cmd("cancel 0"))
			leaked++;
	n = 0;
	err = 0;
	for (int s = 0; s < 64 && !err; s++) {
		err = cmd("register %d", s);
		n += !err;
	}
	cancel_all();
	ksft_test_result(ours == 61 && err == -EBUSY && bits_ok &&
			 __builtin_popcountll(~seen & ~3ULL) == 1 &&
			 !leaked && n == 61,
			 "registration: 61 tracers + perf's = BITS_PER_LONG - 2, -EBUSY, bit reuse, no leak after 200 cycles (%d again)\n",
			 n);
}

static int setup_tracers(void)
{
	cmd("reset");
	cancel_all();
	return register_range(0, nr_tracers);
}

static void stop_target(struct target_arg *a, pthread_t *th)
{
	while (!a->done)
		usleep(1000);
	cmd("disarm");
	a->release = 1;
	pthread_join(*th, NULL);
}

static void run_target(unsigned int ms, unsigned int period_us,
		       unsigned int spin_us, bool spin_requests,
		       struct target_arg *a, pthread_t *th, bool wait,
		       const char *kernel_cmd)
{
	static char spin[64];

	if (kernel_cmd)
		snprintf(spin, sizeof(spin), "%s", kernel_cmd);
	else
		snprintf(spin, sizeof(spin), "spin %u %d", spin_us, spin_requests);
	memset(a, 0, sizeof(*a));
	a->ms = ms;
	a->spin = spin;
	if (pthread_create(th, NULL, target_main, a))
		ksft_exit_fail_msg("pthread_create\n");
	while (!a->tid)
		usleep(1000);
	if (cmd("arm %d %llx 3 %u", a->tid, (unsigned long long)req_mask,
		period_us))
		ksft_print_msg("arm failed: %s\n", strerror(errno));
	a->go = 1;
	if (wait)
		stop_target(a, th);
}

static void test_nmi(const char *name, unsigned int ms, unsigned int period,
		     unsigned int spin_us, bool spin_requests, bool need_user)
{
	struct target_arg a;
	struct verdict v;
	pthread_t th;
	long nmi_user, nmi_kernel, irq, task;
	bool ok;

	if (setup_tracers()) {
		ksft_test_result_fail("%s: cannot register tracers\n", name);
		return;
	}
	read_tracers();
	run_target(ms, period, spin_us, spin_requests, &a, &th, true, NULL);
	read_logs();
	check_run(a.tid, &v, always);
	print_verdict(name, &v);
	ksft_print_msg("%s: NMI requests nested in a timer interrupt %ld, in a system call %ld; most NMI requests in one entry %zu; request rounds throttled (log full) %ld\n",
		       name, stat_of("req_nmi_timer"), stat_of("req_nmi_spin"),
		       v.max_nmi_per_entry, stat_of("throttled"));
	nmi_user = stat_of("req_nmi_user");
	nmi_kernel = stat_of("req_nmi_kernel");
	irq = stat_of("req_irq");
	task = stat_of("req_task");
	ksft_print_msg("%s: NMIs sent %ld, handled %ld; request rounds: NMI in user mode %ld, NMI in the kernel %ld, IRQ %ld, task %ld; spins %ld; NMIs in the kernel outside a spin (no request) %ld\n",
		       name, stat_of("nmi_sent"), stat_of("nmi"), nmi_user,
		       nmi_kernel, irq, task, stat_of("spins"),
		       stat_of("nmi_kernel_skipped"));
	ok = stats_clean() && verdict_clean(&v);
	/* A run that reached no context, or checked no stack, proves nothing. */
	if ((need_user && (nmi_user < 1 || !v.user_exact)) || nmi_kernel < 1 ||
	    irq < 1 || !v.in_nmi || !v.in_irq ||
	    (spin_requests && !v.in_task) || stat_of("req_nmi_timer") < 1 ||
	    stat_of("req_nmi_spin") < 1 || (spin_requests && task < 1) ||
	    !v.spin_exact || (!need_user && v.max_nmi_per_entry < 10)) {
		ksft_print_msg("%s: a context or a stack kind was not reached\n",
			       name);
		ok = false;
	}
	ksft_test_result(ok, "%s\n", name);
	cancel_all();
}

/*
 * Test 4 (@mode 0: the request from the callback), 6 (1: from an NMI the
 * callback sends to its CPU) and 7 (2: from an NMI after the unwinder's
 * task_work): rounds of one "request" system call each, MASK's 5 tracers
 * asking twice; slot 0's callback starts the chain.
 */
static void test_chain(int mode)
{
	static const char *const names[] = {
		"chain", "chain from NMI in the task_work",
		"chain from NMI after the task_work",
	};
	const char *name = names[mode];
	struct verdict v;
	int tid = gettid(), iters = 50, chained = 0, bad = 0, again = 0, others = 0;
	size_t want_reqs = mode ? 3 : 1;
	long nmi_reqs;

	if (setup_tracers() || register_range(CHAIN_TO, CHAIN_TO + 1) != -EEXIST) {
		ksft_test_result_fail("%s: cannot register tracers\n", name);
		return;
	}
	read_tracers();
	/* No timers: only this thread's own requests, one per system call. */
	if (cmd("arm %d %llx 0 1000000", tid, (unsigned long long)MASK) ||
	    cmd("chain 0 %d %d", CHAIN_TO, mode)) {
		ksft_test_result_fail("%s: arm\n", name);
		return;
	}
	for (int i = 0; i < iters; i++)
		cmd("request");
	cmd("disarm");
	read_logs();
	check_run(tid, &v, always);
	print_verdict(name, &v);
	/*
	 * Each round: one cookie, 5 callbacks, then CHAIN_TO's once.  The
	 * chain's requests ('W' from the callback, 'M' from the NMI): for
	 * CHAIN_TO (0, then 1 from NMI) and, from NMI, for slot 0 (1): each
	 * with exactly one callback of its tracer and cookie.
	 */
	for (size_t i = 0; i < nr_req; i++) {
		const struct req *r = &reqs[i];
		bool to = r->slot == CHAIN_TO;
		int n = 0;

		if (r->ctx != 'W' && r->ctx != 'M') {
			others += r->ctx != 'T';
			continue;
		}
		if (r->ctx != (mode ? 'M' : 'W') || (mode && (!r->nmi || !r->hardirq)) ||
		    (!to && r->slot != 0)) {
			bad++;
			continue;
		}
		if (to && !r->rep) {
			chained++;
			bad += r->ret != 0;
		} else {
			again++;
			bad += r->ret != 1;
		}
		for (size_t j = 0; j < nr_cb; j++)
			if (cbs[j].slot == r->slot && cbs[j].cookie == r->cookie)
				n++;
		bad += n != 1;
	}
	nmi_reqs = stat_of("req_work_nmi");
	ksft_print_msg("%s: %d rounds, %d chained requests (0: queued), %d repeated or for the running tracer (1), %d bad, %d of another context; %ld from NMI, %ld NMIs not delivered in time; %zu callbacks (want %d)\n",
		       name, iters, chained, again, bad, others, nmi_reqs,
		       stat_of("chain_nmi_missed"), nr_cb, iters * 6);
	ksft_test_result(verdict_clean(&v) && stats_clean() && !bad && !others &&
			 chained == iters && (size_t)(chained + again) == iters * want_reqs &&
			 nmi_reqs == (mode ? iters * 3 : 0) && !stat_of("chain_nmi_missed") &&
			 v.cookies == (size_t)iters && nr_cb == (size_t)iters * 6 &&
			 (!mode || v.in_nmi == (size_t)iters * 3),
			 "%s: the request runs once more, same cookie and trace%s\n", name,
			 mode ? "; a repeat and the running tracer's own answer 1" : "");
	cmd("chain -1 -1");
	cancel_all();
}

/* Registrations cancelled during test 5: they may miss callbacks. */
static uint32_t cancelled_gens[512];
static int nr_cancelled;

static bool not_cancelled(uint32_t slot __attribute__((unused)), uint32_t gen)
{
	for (int i = 0; i < nr_cancelled; i++)
		if (cancelled_gens[i] == gen)
			return false;
	return true;
}

/*
 * The window cancel exists for, reached on purpose: a request queued (it
 * returned 0) whose registration is cancelled before the task_work runs.
 * In the race above that window is rare: a cancel's grace periods do not
 * end while the thread busy-waits in the kernel (non-preemptible RCU), so
 * they outlast its system calls.  Here the thread requests for every
 * tracer from task context and then sleeps 500 ms in the same system call
 * ("nap"); meanwhile slot 0 is cancelled (and registered again).  That
 * request must never be called back, the others must be, and nothing else
 * may go wrong (the same verdict as the race).  Returns the number of such
 * requests (1 when all is well), or -1 if the phase went wrong.
 */
static int cancel_queued(void)
{
	struct target_arg a;
	struct verdict v;
	uint64_t nap_cookie = 0;
	uint32_t old_gen;
	pthread_t th;
	int found = 0;

	if (setup_tracers())
		return -1;
	cmd("delay 0");
	read_tracers();
	old_gen = gen_of_slot[0];
	nr_cancelled = 0;
	cancelled_gens[nr_cancelled++] = old_gen;
	/* One user phase, then one nap: 1 ms of CPU ends the loop. */
	run_target(1, 200, 0, false, &a, &th, false, "nap 500");
	while (stat_of("req_task") < 1 && !a.done)
		usleep(1000);
	if (cmd("cancel 0") || cmd("register 0")) {
		stop_target(&a, &th);
		return -1;
	}
	stop_target(&a, &th);
	read_tracers();
	read_logs();
	check_run(a.tid, &v, not_cancelled);
	print_verdict("cancel while queued", &v);
	/*
	 * The nap's entry: the cookie of its task-context requests.  Its
	 * first request of slot 0 may also have come from a timer interrupt
	 * that hit the system call before the nap began (an IRQ request with
	 * no label); either way one request of the entry returned 0.
	 */
	for (size_t i = 0; i < nr_req && !nap_cookie; i++)
		if (reqs[i].tid == (uint32_t)a.tid && reqs[i].ctx == 'T')
			nap_cookie = reqs[i].cookie;
	for (size_t i = 0; i < nr_req; i++) {
		const struct req *r = &reqs[i];
		bool called = false;

		if (r->tid != (uint32_t)a.tid || r->gen != old_gen || r->ret ||
		    !nap_cookie || r->cookie != nap_cookie)
			continue;
		for (size_t j = 0; j < nr_cb && !called; j++)
			called = cbs[j].gen == old_gen && cbs[j].cookie == r->cookie;
		found += !called;
	}
	ksft_print_msg("cancel while queued: %d requests of the cancelled registration queued in the nap and never called back\n",
		       found);
	for (size_t i = 0, shown = 0; found != 1 && i < nr_req && shown < 12; i++) {
		const struct req *r = &reqs[i];

		if (r->tid != (uint32_t)a.tid || r->slot != 0)
			continue;
		shown++;
		ksft_print_msg("  slot 0 request: ctx %c gen %u (cancelled: %u) ret %d label %#x cookie %#llx (nap's %#llx)\n",
			       r->ctx, r->gen, old_gen, r->ret, r->label,
			       (unsigned long long)r->cookie,
			       (unsigned long long)nap_cookie);
	}
	if (!verdict_clean(&v) || !stats_clean() || !v.spin_exact)
		return -1;
	return found;
}

static void test_cancel_race(void)
{
	static const int slots[] = { 0, 1, 2, 38, 39 };
	struct target_arg a;
	struct verdict v;
	pthread_t th;
	int cycles = 0, errs = 0, n = 0, err = 0, cancelled_calls = 0;
	int queued_cancelled;
	bool ok;

	if (setup_tracers()) {
		ksft_test_result_fail("cancel race: cannot register tracers\n");
		return;
	}
	cmd("delay 300");	/* callbacks sleep: cancel waits for them */
	nr_cancelled = 0;
	run_target(3000, 200, 3000, false, &a, &th, false, NULL);
	while (!a.done && nr_cancelled < 512) {
		int s = slots[cycles % 5];

		read_tracers();
		cancelled_gens[nr_cancelled++] = gen_of_slot[s];
		if (cmd("cancel %d", s) || cmd("register %d", s))
			errs++;
		cycles++;
		usleep(2000);
	}
	stop_target(&a, &th);
	read_tracers();
	read_logs();
	check_run(a.tid, &v, not_cancelled);
	print_verdict("cancel race", &v);
	ksft_print_msg("cancel race: %d cancel+register cycles, %d errors; NMI rounds %ld user %ld kernel, IRQ %ld\n",
		       cycles, errs, stat_of("req_nmi_user"),
		       stat_of("req_nmi_kernel"), stat_of("req_irq"));
	/*
	 * Upstream C takes a task's pending bits before it enters its SRCU
	 * section and clears a cancelled bit after its grace period, so a
	 * task_work can call the work that inherited the bit for the old
	 * work's request (kernel/unwind/deferred.c; the host model checker
	 * shows the interleaving).  Counted, not failed, on C only.
	 */
	if (!is_rust && v.unrequested) {
		ksft_print_msg("cancel race: upstream C: %zu calls of a new work for an old work's request\n",
			       v.unrequested);
		v.unrequested = 0;
	}
	/* The race was run: requests from NMI and IRQ, and callbacks of
	 * registrations that were cancelled afterwards. */
	for (size_t i = 0; i < nr_cb; i++)
		if (cbs[i].tid == (uint32_t)a.tid && !not_cancelled(cbs[i].slot, cbs[i].gen))
			cancelled_calls++;
	ksft_print_msg("cancel race: %d callbacks of registrations cancelled later\n",
		       cancelled_calls);
	ok = stat_of("req_irq") > 0 && stat_of("req_nmi_user") > 0 &&
	     v.in_nmi && v.in_irq && !v.ctx_wrong && !malformed &&
	     cancelled_calls > 0 && !v.trace_differs &&
	     stats_clean() && !errs && cycles > 10 && v.unrequested == 0 &&
	     !v.after_cancel_cb && !v.dup && !v.missing && !v.bad_ret &&
	     !v.bad_rep && !v.zero_cookie && !v.label_split &&
	     !v.label_shared && !v.bad_flags && !v.kernel_addr &&
	     !v.user_bad && !v.spin_bad;
	queued_cancelled = cancel_queued();
	if (queued_cancelled != 1)
		ok = false;
	/* Everything is given back. */
	cancel_all();
	for (int s = 0; s < 64 && !err; s++) {
		err = cmd("register %d", s);
		n += !err;
	}
	cancel_all();
	if (n != 61) {
		ksft_print_msg("cancel race: only %d tracers fit afterwards\n", n);
		ok = false;
	}
	ksft_test_result(ok, "cancel race: no callback after cancel, no call without a request, bits given back\n");
}

int main(int argc, char **argv)
{
	ksft_print_header();
	ksft_set_plan(8);
	if (dc_syms_load())
		ksft_exit_fail_msg("cannot read own symbol table\n");
	if (access(DIR, F_OK))
		mount("debugfs", "/sys/kernel/debug", "debugfs", 0, NULL);
	ctl = open(DIR "/ctl", O_WRONLY);
	if (ctl < 0)
		ksft_exit_fail_msg("%s: %s (CONFIG_UNWIND_DEFERRED_TEST)\n",
				   DIR "/ctl", strerror(errno));
	reqs = calloc(MAX_REQ, sizeof(*reqs));
	cbs = calloc(MAX_CB, sizeof(*cbs));
	if (!reqs || !cbs)
		ksft_exit_fail_msg("out of memory\n");
	is_rust = read_impl();
	if (stat_of("max_req") != MAX_REQ || stat_of("max_cb") != MAX_CB)
		ksft_exit_fail_msg("driver logs hold %ld requests and %ld callbacks, the test reads %d and %d\n",
				   stat_of("max_req"), stat_of("max_cb"), MAX_REQ, MAX_CB);
	ksft_print_msg("implementation: %s\n", is_rust ? "rust" : "c");

	test_registration();
	test_nmi("NMI and IRQ requests, user mode and syscalls", 1500, 500,
		 2000, false, true);
	/* Many NMIs per kernel entry: every 50 us from both CPUs (under TCG
	 * with lockdep an NMI takes tens of us; faster ones coalesce). */
	test_nmi("NMI storm with task-context requests", 600, 50, 10000,
		 true, false);
	test_chain(0);
	test_cancel_race();
	test_chain(1);
	test_chain(2);
	nr_tracers = ALL_TRACERS;
	req_mask = (1ULL << ALL_TRACERS) - 1;
	test_nmi("all 61 tracers requesting from NMI, IRQ and task", 400, 500, 2000,
		 true, true);
	cmd("reset");
	dc_finished();
}
