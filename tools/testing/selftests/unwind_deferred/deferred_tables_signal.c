// SPDX-License-Identifier: GPL-2.0
/*
 * Deferred user callchains through signal frames, unwound by the objects'
 * .eh_frame tables (the Rust unwinder's table mode, sysctl
 * kernel.unwind_user_tables): a sample taken in a system call of a signal
 * handler must give the handler, the signal frame, the interrupted
 * function and all its callers, down to _start.
 *
 * Built as deferred_tables (-O2 -fomit-frame-pointer: no frame pointer in
 * our code, none in glibc; x86_64 linked dynamically against glibc and
 * -no-pie, libc's frames named by its .dynsym).  A child
 * (dc_profile_child(), per-task cpu-clock at 10 kHz, defer_callchain)
 * runs a frameless recursion in user mode,
 *
 *   run_victims -> victim_a x3 -> victim_b x3 -> victim_c x3
 *
 * (each level self-recursive, churning a little before and after its
 * call; the innermost spins for 3 ms of CPU, then all of it returns and
 * run_victims goes down again), under ITIMER_REAL (every 3 ms; rearmed
 * when the signal is taken): the SIGALRM handler on_signal (frameless,
 * SA_SIGINFO) calls getppid() as many times as take 1 ms here (measured
 * first, the fastest of 50 rounds), if the signal interrupted the
 * recursion (a flag the outermost victim_a sets and clears; so the
 * interrupted function is always one of the victims).  Each run lasts
 * until the handler has run GATED (40) times with its getppid() loop
 * (at most 20 s of CPU: then the run fails): counts, not CPU time, as
 * the guest's clocks count the time the host takes the vCPU away, with
 * no timer interrupt in it.  glibc's sigaction
 * sets its __restore_rt as the restorer; the i386 static glibc leaves it
 * to the kernel, which uses the vDSO's __kernel_rt_sigreturn.  The chain
 * of a sample in the handler's getppid (x86_64):
 *
 *   getppid [libc] <- on_signal <- SIGRETURN <- VICTIMS <- run_victims <-
 *   dc_profile_child <- measure <- main <- (libc: the local
 *   __libc_start_call_main, exactly one) <- __libc_start_main [libc] <-
 *   _start (the end of the stack: its CFI leaves the return address
 *   undefined)
 *
 *   SIGRETURN: the handler's return address is the restorer itself, the
 *     code "mov $15,%rax; syscall" (48 c7 c0 0f 00 00 00 0f 05) in libc
 *     (i386: "mov $173,%eax; int $0x80", b8 ad 00 00 00 cd 80,
 *     __kernel_rt_sigreturn [vdso]); libc's .dynsym does not name it, so
 *     the entry is recognised by those bytes at its address.
 *   VICTIMS: the interrupted function, then its callers, one of
 *     victim_c x1..3 <- victim_b x3 <- victim_a x3, victim_b x1..3 <-
 *     victim_a x3 or victim_a x1..3 (the whole chain is exact: the
 *     number of frames of each).  The interrupted frame's entry is the
 *     interrupted pc (not a return address), named at that address.
 *
 * i386 (deferred_tables_signal_32, static, --eh-frame-hdr as
 * deferred_tables_32): __kernel_vsyscall [vdso] <- getppid <- on_signal
 * <- __kernel_rt_sigreturn [vdso] <- VICTIMS <- run_victims <-
 * dc_profile_child <- measure <- main <- __libc_start_call_main <-
 * __libc_start_main <- _start, all but the vDSO named by the binary's
 * own symbol table.  Not in the top Makefile's SELFTESTS yet: on the
 * Rust kernel its records of the handler's getppid stop at the
 * trampoline, __kernel_vsyscall <- getppid <- on_signal <-
 * __kernel_rt_sigreturn, and stats count refused_no_fde, for two
 * reasons.  The 7.3 vDSO's FDE of __kernel_rt_sigreturn starts at the
 * function (the nop before it is for libgcc, which matches the code
 * bytes rather than look up the FDE), so the lookup of the handler's
 * return address - 1 finds no FDE; and that FDE is CFA = esp + k with
 * esp (and eip, ebp) saved at CFA + n (CFI_DEF_CFA, CFI_OFFSET, no
 * DW_OP_deref expression), so even found, taking the CFA as the caller's
 * stack pointer would be wrong: the interrupted esp is the word at
 * CFA + n.  Its table tests pass once the walk handles both.
 *
 * Three cases: the handler on the thread's stack; on a sigaltstack
 * (SA_ONSTACK) mapped at a low address (256 MiB), far below the stack,
 * so the signal frame's CFA, the interrupted stack pointer, is far above
 * the handler's frames; and (x86_64) on a sigaltstack mapped above the
 * thread's stack (1 GiB above its top, or less where there is no room;
 * the i386 stack has at most 8 MiB above it), so the interrupted stack
 * pointer is below the signal frame: the one step of a walk that may go
 * down.  The handler counts, in shared memory, its entries, those that
 * ran on the alternate stack and those that called getppid().
 *
 * Asserted, in every mode (tables off, tables on, or the kernel as it is
 * where there is no switch): the handler ran GATED times with its
 * getppid() loop, on the stack of the case every time (and no signal
 * interrupted code on the alternate stack); at least MIN_SAMPLES
 * samples, MIN_LEAF of them with records in the handler's getppid;
 * every sample ends with PERF_CONTEXT_USER_DEFERRED + cookie, every
 * cookie has exactly one record of the child (but the final-stop sample,
 * see deferred_task.c), every record has a sample, is MISC_USER,
 * non-empty, with no kernel address and (on Rust, or with tables on) no
 * other non-user one; nothing lost, nothing malformed.  With tables on
 * (the Rust kernel): at least 99% of the records in the handler's
 * getppid are exactly the whole chain above, and the stats' table_frames
 * grew.  Without the switch the two table tests FAIL on the Rust kernel
 * (fail closed: a Rust kernel must have table unwinding) and are SKIPped
 * on the upstream C kernel (SKIP_c in the top Makefile), which unwinds
 * by frame pointers only.
 *
 * With tables off and on C the frame-pointer walk's outcome is printed,
 * not asserted: the share of exact chains, of records that reach the
 * signal frame, of records of one entry.  Found on both kernels: every
 * x86_64 record in the handler's getppid is that entry alone (getppid
 * has no frame, and on_signal keeps its loop bound, a small number, in
 * %rbp, which as a frame pointer is below the stack pointer: the walk
 * ends), none reaches the signal frame; i386: __kernel_vsyscall alone
 * (41-100% of them in our runs) or followed by one word that is no
 * return address (0 on C), none reaching the signal frame either.
 *
 * Also printed, not asserted: the same exactness for records that start
 * in the handler's own code (on_signal <- SIGRETURN <- VICTIMS <- ...)
 * and in a victim (VICTIMS <- ...: samples of the recursion itself).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "../kselftest.h"
#include "dc_util.h"

#define PERIOD_NS	100000		/* 10 kHz */
#define RING_PAGES	512		/* 2 MiB */
#define GATED		40		/* handler runs with getppid() per run */
#define MAX_MS		20000		/* CPU time cap of each run (a failure) */
#define TIMER_US	3000		/* ITIMER_REAL's period */
#define HANDLER_US	1000		/* the handler's getppid() loop */
#define SLICE_MS	3		/* the innermost victim's spin */
#define DEPTH		3		/* frames of each victim */
#define CHURN		200		/* each victim level's work */
#define MIN_SAMPLES	40
#define MIN_LEAF	20
#define ALT_SIZE	(64 * 1024)
#define ALT_LOW		0x10000000UL	/* 256 MiB */
#define ALT_STEP	0x01000000UL	/* 16 MiB */
#define KERNEL_MIN	0xffff800000000000ULL
#define MAX_EL		48

#define NO_TAIL() asm volatile("" ::: "memory")
#define FRAME __attribute__((noipa))

#ifdef __x86_64__
#define SP_REG		"%%rsp"
#define UC_SP(uc)	((unsigned long)(uc)->uc_mcontext.gregs[REG_RSP])
static const uint8_t sigret_code[] = { 0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05 };
#else
#define SP_REG		"%%esp"
#define UC_SP(uc)	((unsigned long)(uc)->uc_mcontext.gregs[REG_UESP])
static const uint8_t sigret_code[] = { 0xb8, 0xad, 0, 0, 0, 0xcd, 0x80 };
#endif

/* ---------------- the child: victims and the handler ---------------- */

/* Written by the child's handler, read by the parent. */
struct shared {
	unsigned long entries;	/* handler entries */
	unsigned long gated;	/* of those, with the getppid() loop */
	unsigned long on_alt;	/* handler ran on the alternate stack */
	unsigned long int_on_alt;	/* interrupted sp on the alternate stack */
	unsigned long descents;	/* run_victims' calls of victim_a */
	int err;		/* set-up failure in the child (errno) */
};

struct case_arg {
	const char *name;
	bool alt, high;
	unsigned long alt_lo;	/* the alternate stack (alt) */
	bool no_room;		/* high: no room above the stack */
};

/* The child's state (set by run_victims, in the child). */
static struct shared *sh;
static volatile int gate;
static unsigned long alt_lo, alt_size;
static unsigned int handler_calls;	/* set by the parent before fork */
static uint64_t run_end;

struct ts {
	long sec, nsec;
};

/* The thread's CPU time in ms, with no libc or vDSO frame. */
static inline __attribute__((always_inline)) uint64_t cpu_ms(void)
{
	struct ts t;

	dc_syscall3(__NR_clock_gettime, 3 /* CLOCK_THREAD_CPUTIME_ID */, (long)&t, 0);
	return (uint64_t)t.sec * 1000 + t.nsec / 1000000;
}

static inline __attribute__((always_inline)) unsigned long churn(unsigned long x, int n)
{
	for (int i = 0; i < n; i++) {
		x = x * 1103515245UL + 12345;
		asm volatile("" : "+r"(x));
	}
	return x;
}

FRAME void on_signal(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	struct shared *s = sh;
	unsigned long sp;

	asm volatile("mov " SP_REG ", %0" : "=r"(sp));
	s->entries++;
	s->on_alt += sp - alt_lo < alt_size;
	s->int_on_alt += UC_SP(uc) - alt_lo < alt_size;
	if (!gate)
		return;
	s->gated++;
	for (unsigned int i = 0; i < handler_calls; i++)
		getppid();	/* through libc: the leaf is libc's getppid */
	NO_TAIL();
}

FRAME unsigned long victim_c(int n, unsigned long x)
{
	volatile unsigned long keep = x;	/* a frame with a stack slot */

	x = churn(x, CHURN);
	if (n > 1) {
		x += victim_c(n - 1, x);
	} else {
		uint64_t stop = cpu_ms() + SLICE_MS;

		if (stop > run_end)
			stop = run_end;
		do
			x = churn(x, 2000);
		while (cpu_ms() < stop);
	}
	NO_TAIL();
	return churn(x, CHURN) + keep;
}

FRAME unsigned long victim_b(int n, unsigned long x)
{
	volatile unsigned long keep = x;

	x = churn(x, CHURN);
	x += n > 1 ? victim_b(n - 1, x) : victim_c(DEPTH, x);
	NO_TAIL();
	return churn(x, CHURN) + keep;
}

FRAME unsigned long victim_a(int n, unsigned long x)
{
	volatile unsigned long keep = x;

	if (n == DEPTH)
		gate = 1;
	NO_TAIL();
	x = churn(x, CHURN);
	x += n > 1 ? victim_a(n - 1, x) : victim_b(DEPTH, x);
	NO_TAIL();
	x = churn(x, CHURN) + keep;
	if (n == DEPTH)
		gate = 0;
	NO_TAIL();
	return x;
}

struct run_arg {
	struct case_arg *c;
	unsigned long gated;	/* handler runs to wait for */
	struct shared *sh;
};

FRAME void run_victims(void *p)
{
	struct run_arg *a = p;
	struct sigaction sa = { .sa_sigaction = on_signal,
				.sa_flags = SA_SIGINFO | SA_RESTART };
	struct itimerval it = { { 0, TIMER_US }, { 0, TIMER_US } };
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	unsigned long x = 1;

	sh = a->sh;
	if (a->c->alt) {
		stack_t ss = { .ss_sp = (void *)a->c->alt_lo, .ss_size = ALT_SIZE };

		alt_lo = a->c->alt_lo;
		alt_size = ALT_SIZE;
		sa.sa_flags |= SA_ONSTACK;
		if (sigaltstack(&ss, NULL)) {
			sh->err = errno;
			return;
		}
	}
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL)) {
		sh->err = errno;
		return;
	}
	run_end = cpu_ms() + MAX_MS;
	if (setitimer(ITIMER_REAL, &it, NULL)) {
		sh->err = errno;
		return;
	}
	do {
		x += victim_a(DEPTH, x);
		sh->descents++;
	} while (sh->gated < a->gated && cpu_ms() < run_end);
	setitimer(ITIMER_REAL, &off, NULL);
	signal(SIGALRM, SIG_IGN);
	NO_TAIL();
}

/* ---------------- expected chains ---------------- */

static struct dc_dso libc_dso, vdso_dso;

enum kind { K_END, K_EXE, K_LIBC, K_LIBC_LOCAL, K_VDSO, K_SIGRET };

struct el {
	enum kind k;
	const char *name;
};

/* Is @e, the entry itself (a return address), the sigreturn trampoline? */
static bool is_sigret(uint64_t e)
{
#ifdef __x86_64__
	const struct dc_dso *d = &libc_dso;
#else
	const struct dc_dso *d = &vdso_dso;
#endif
	return dc_dso_has(d, e) && dc_dso_has(d, e + sizeof(sigret_code) - 1) &&
	       !memcmp((const void *)(uintptr_t)e, sigret_code, sizeof(sigret_code));
}

/* Does frame address @a (entry @e) match @el? */
static bool frame_is(uint64_t a, uint64_t e, const struct el *el)
{
	switch (el->k) {
	case K_EXE:
		return dc_sym_is(a, el->name);
	case K_LIBC:
		return dc_dso_has(&libc_dso, a) && dc_dso_name(&libc_dso, a, el->name, NULL);
	case K_LIBC_LOCAL:
		return dc_dso_has(&libc_dso, a) && !dc_dso_name(&libc_dso, a, NULL, NULL);
	case K_VDSO:
		return dc_dso_has(&vdso_dso, a) && dc_dso_name(&vdso_dso, a, el->name, NULL);
	case K_SIGRET:
		return is_sigret(e);
	default:
		return false;
	}
}

/*
 * The address that names entry @i: the first entry and the one after a
 * signal frame are the interrupted pcs, the others return addresses
 * (the call is just before).
 */
static uint64_t frame_addr(const uint64_t *ips, uint32_t i)
{
	return !i || is_sigret(ips[i - 1]) ? ips[i] : ips[i] - 1;
}

/* Is the record exactly @want?  *@where: the first entry that is not. */
static bool chain_is(const uint64_t *ips, uint32_t nr, const struct el *want,
		     uint32_t *where)
{
	uint32_t i;

	for (i = 0; want[i].k != K_END; i++) {
		if (i >= nr || !frame_is(frame_addr(ips, i), ips[i], &want[i])) {
			*where = i;
			return false;
		}
	}
	*where = i;
	return i == nr;
}

enum cls { C_LEAF, C_HANDLER, C_VICTIM, NR_CLS };

/* Every chain of each class: the victims' possible depths. */
#define NR_ALT	(3 * DEPTH)
static struct el chains[NR_CLS][NR_ALT][MAX_EL];

static const struct el tail[] = {
	{ K_EXE, "run_victims" }, { K_EXE, "dc_profile_child" }, { K_EXE, "measure" },
	{ K_EXE, "main" },
#ifdef __x86_64__
	{ K_LIBC_LOCAL, NULL } /* __libc_start_call_main */,
	{ K_LIBC, "__libc_start_main" },
#else
	{ K_EXE, "__libc_start_call_main" }, { K_EXE, "__libc_start_main" },
#endif
	{ K_EXE, "_start" }, { K_END, NULL }
};

static const struct el head_leaf[] = {
#ifdef __x86_64__
	{ K_LIBC, "getppid" },
#else
	{ K_VDSO, "__kernel_vsyscall" }, { K_EXE, "getppid" },
#endif
	{ K_EXE, "on_signal" }, { K_SIGRET, NULL }, { K_END, NULL }
};
static const struct el head_handler[] = {
	{ K_EXE, "on_signal" }, { K_SIGRET, NULL }, { K_END, NULL }
};
static const struct el head_victim[] = { { K_END, NULL } };

static void build_chains(void)
{
	static const char *const victims[] = { "victim_a", "victim_b", "victim_c" };
	const struct el *heads[NR_CLS] = { head_leaf, head_handler, head_victim };

	for (int c = 0; c < NR_CLS; c++) {
		for (int x = 0; x < 3; x++) {
			for (int k = 1; k <= DEPTH; k++) {
				struct el *out = chains[c][x * DEPTH + k - 1];
				int n = 0;

				for (const struct el *h = heads[c]; h->k != K_END; h++)
					out[n++] = *h;
				/* the interrupted function at its k-th level */
				for (int j = 0; j < k; j++)
					out[n++] = (struct el){ K_EXE, victims[x] };
				for (int y = x - 1; y >= 0; y--)
					for (int j = 0; j < DEPTH; j++)
						out[n++] = (struct el){ K_EXE, victims[y] };
				for (const struct el *t = tail; ; t++) {
					out[n++] = *t;
					if (t->k == K_END)
						break;
				}
			}
		}
	}
}

static void chain_str(const struct el *p, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (; p->k != K_END && n < len; p++) {
		const char *s = p->name;
		char one[96];

		if (p->k == K_SIGRET)
			s = sizeof(long) == 8 ? "__restore_rt [libc: mov $15,%rax; syscall]" :
						"__kernel_rt_sigreturn [vdso: mov $173,%eax; int $0x80]";
		snprintf(one, sizeof(one), "%s%s", p->k == K_LIBC_LOCAL ? "(libc)" : s,
			 p->k == K_LIBC ? " [libc]" : p->k == K_VDSO ? " [vdso]" : "");
		n += snprintf(buf + n, len - n, "%s%s", n ? " <- " : "", one);
	}
}

#ifndef __x86_64__
/*
 * Is @a in @name or in one of GCC's clones of it (name.constprop.0,
 * name.isra.0, name.part.0: i386 libc's raise() calls
 * __pthread_kill_implementation.constprop.0)?
 */
static bool in_func(uint64_t a, const char *name)
{
	const char *n = dc_sym(a, NULL);
	size_t l = strlen(name);

	return dc_sym_is(a, name) || (n && !strncmp(n, name, l) && n[l] == '.');
}
#endif

/* Which class of record is this (its first frame), or -1. */
static int classify(const struct dc_sample *s, const struct dc_deferred *d)
{
	uint64_t a;

	if (!d->nr)
		return -1;
	a = d->ips[0];
#ifdef __x86_64__
	if (frame_is(a, a, &head_leaf[0]))
		return C_LEAF;
#else
	/*
	 * i386: every system call of libc enters through
	 * __kernel_vsyscall; the child's others are the set-up's and
	 * dc_profile_child's (its start-up read, its raise()).
	 */
	if (frame_is(a, a, &head_leaf[0])) {
		static const char *const others[] = {
			"read", "close", "__libc_sigaction", "sigaltstack", "setitimer",
			"__setitimer64", "__pthread_kill_implementation",
			"__libc_signal_restore_set", "__sigprocmask", "raise", "signal",
			"getpid",
		};
		uint64_t c = d->nr > 1 ? d->ips[1] - 1 : 0;

		for (size_t i = 0; i < ARRAY_SIZE(others); i++)
			if (c && in_func(c, others[i]))
				return -1;
		/*
		 * A sample in another system call (a frame-pointer walk may
		 * skip its wrapper), by its handler's name: kallsyms names
		 * some that ia32_sys_call() calls __x64_sys_ (getppid's,
		 * getpid's), as in this test's samples.
		 */
		for (uint32_t i = 0; i < s->nr_kernel; i++) {
			const char *k = dc_ksym(s->kernel[i]);

			if ((!strncmp(k, "__ia32_sys_", 11) && strcmp(k, "__ia32_sys_getppid")) ||
			    (!strncmp(k, "__x64_sys_", 10) && strcmp(k, "__x64_sys_getppid")) ||
			    !strncmp(k, "__ia32_compat_sys_", 18))
				return -1;
		}
		return C_LEAF;
	}
#endif
	if (dc_sym_is(a, "on_signal"))
		return C_HANDLER;
	if (dc_sym_is(a, "victim_a") || dc_sym_is(a, "victim_b") ||
	    dc_sym_is(a, "victim_c"))
		return C_VICTIM;
	return -1;
}

/* ---------------- printing ---------------- */

static const char *frame_name(uint64_t a, const char **where, uint64_t *off)
{
	const char *n;

	*off = 0;
	*where = "";
	n = dc_sym(a, off);
	if (n)
		return n;
	if (dc_dso_has(&libc_dso, a)) {
		*where = " [libc]";
		n = dc_dso_name(&libc_dso, a, NULL, off);
		if (!n)
			*off = a - libc_dso.bias;
		return n ? n : "libc.so.6";
	}
	if (dc_dso_has(&vdso_dso, a)) {
		*where = " [vdso]";
		n = dc_dso_name(&vdso_dso, a, NULL, off);
		return n ? n : "vdso";
	}
	return "?";
}

static void print_merged(const struct dc_sample *s, const struct dc_deferred *d)
{
	printf("#   sample pid %u tid %u cookie %#llx, record of %u entries\n",
	       s->pid, s->tid, (unsigned long long)s->cookie, d ? d->nr : 0);
	for (uint32_t i = 0; i < s->nr_kernel; i++)
		printf("#     %016llx %s [kernel]\n",
		       (unsigned long long)s->kernel[i], dc_ksym(s->kernel[i]));
	for (uint32_t i = 0; d && i < d->nr; i++) {
		bool sigret = is_sigret(d->ips[i]);
		/* the trampoline by its own address: libc names nothing there */
		uint64_t a = sigret ? d->ips[i] : frame_addr(d->ips, i), off;
		bool ra = a != d->ips[i];
		const char *where, *name = frame_name(a, &where, &off);

		printf("#     %016llx %s+%#llx%s%s\n", (unsigned long long)d->ips[i],
		       name, (unsigned long long)(off + ra), where,
		       sigret ? " (the sigreturn trampoline)" :
		       i && !ra ? " (the interrupted pc)" : "");
	}
}

/* ---------------- one run ---------------- */

enum mode { M_ASIS, M_OFF, M_ON };
static const char *const mode_name[] = {
	"no table unwinding on this kernel", "tables off", "tables on"
};

static bool is_rust;

struct res {
	size_t samples, records;
	size_t cls[NR_CLS], exact[NR_CLS];
	size_t sigframe, one_entry;	/* leaf records reaching __restore_rt, of 1 entry */
	size_t unclassed;		/* samples in none of the classes (set-up, raise) */
	size_t bad_pid, bad_ctx, missing, dup, stopping, orphan;
	size_t bad_rec, kaddr, nonuser;
	uint64_t lost, malformed;
	struct shared sh;
	bool have_stats;
	int64_t table_frames;
	char stats[512];
};

static void analyze(const struct case_arg *c, enum mode mode, struct dc_log *log,
		    pid_t pid, struct res *r)
{
	uint64_t user_max = sizeof(long) == 4 ? 1ULL << 32 : DC_USER_MAX;
	int print_bad = mode == M_ON ? 3 : 1;
	bool print_good = true;
	struct dc_rec_key *keys = dc_rec_index(log);

	if (!keys)
		ksft_exit_fail_msg("out of memory\n");
	r->samples = log->nr_samples;
	r->records = log->nr_deferred;
	r->lost = log->lost;
	r->malformed = log->malformed;
	for (size_t i = 0; i < log->nr_samples; i++) {
		struct dc_sample *s = &log->samples[i];
		struct dc_deferred *d;
		uint32_t where = 0, w;
		bool exact = false;
		long idx, n;
		int k;

		if (s->pid != (uint32_t)pid || s->tid != (uint32_t)pid)
			r->bad_pid++;
		if (!s->ends_deferred || !s->cookie || s->has_user_ctx) {
			r->bad_ctx++;
			continue;
		}
		idx = dc_rec_find(keys, log->nr_deferred, s->cookie, s->pid, s->tid, &n);
		if (idx < 0 && dc_in_final_stop(log, s)) {
			r->stopping++;
			continue;
		}
		if (idx < 0) {
			if (r->missing++ < 3) {
				ksft_print_msg("%s, %s: sample %zu: cookie %#llx has no record\n",
					       c->name, mode_name[mode], i,
					       (unsigned long long)s->cookie);
				print_merged(s, NULL);
			}
			continue;
		}
		if (n > 1)
			r->dup++;
		d = &log->deferred[idx];
		d->matched++;
		k = classify(s, d);
		if (k < 0) {
			r->unclassed++;
			continue;
		}
		r->cls[k]++;
		for (int a = 0; a < NR_ALT && !exact; a++) {
			exact = chain_is(d->ips, d->nr, chains[k][a], &w);
			if (w > where)
				where = w;
		}
		r->exact[k] += exact;
		if (k != C_LEAF)
			continue;
		r->one_entry += d->nr == 1;
		for (uint32_t j = 0; j < d->nr; j++) {
			if (is_sigret(d->ips[j])) {
				r->sigframe++;
				break;
			}
		}
		if (exact && print_good) {
			print_good = false;
			ksft_print_msg("%s, %s: first exact record of the handler's getppid:\n",
				       c->name, mode_name[mode]);
			print_merged(s, d);
		} else if (!exact && print_bad) {
			print_bad--;
			ksft_print_msg("%s, %s: sample %zu in the handler's getppid, not the chain (from entry %u of %u):\n",
				       c->name, mode_name[mode], i, where, d->nr);
			print_merged(s, d);
		}
	}
	for (size_t i = 0; i < log->nr_deferred; i++) {
		struct dc_deferred *d = &log->deferred[i];
		bool kk = false, nu = false;

		r->orphan += !d->matched;
		r->bad_rec += d->misc != PERF_RECORD_MISC_USER || !d->nr;
		for (uint32_t j = 0; j < d->nr; j++) {
			kk = kk || d->ips[j] >= KERNEL_MIN;
			nu = nu || (d->ips[j] >= user_max && d->ips[j] < KERNEL_MIN);
		}
		if ((kk || nu) && r->kaddr + r->nonuser < 2) {
			ksft_print_msg("%s, %s: record with a %s address:\n", c->name,
				       mode_name[mode], kk ? "kernel" : "non-user");
			print_merged(&(struct dc_sample){ .pid = d->pid, .tid = d->tid,
					.cookie = d->cookie }, d);
		}
		r->kaddr += kk;
		r->nonuser += nu;
	}
	free(keys);
}

static unsigned long above_stack(void);

/*
 * Map the case's alternate stack at c->alt_lo, or, if something took that
 * address since (the heap grows), at the next free one of its kind: below
 * the stack, up to 15 steps of ALT_STEP higher; above it, above_stack()'s
 * new choice.  The address used is left in c->alt_lo.
 */
static void *map_alt(struct case_arg *c)
{
	unsigned long want = c->alt_lo;
	void *alt = MAP_FAILED;
	int err = 0;

	for (int i = 0; i < 16 && want; i++) {
		alt = mmap((void *)want, ALT_SIZE, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (alt == (void *)want)
			break;
		err = alt == MAP_FAILED ? errno : EEXIST;	/* old kernels: moved */
		if (alt != MAP_FAILED)
			munmap(alt, ALT_SIZE);
		alt = MAP_FAILED;
		if (err != EEXIST)
			break;
		want = c->high ? above_stack() : want + ALT_STEP;
	}
	if (alt == MAP_FAILED)
		ksft_exit_fail_msg("%s: mapping the alternate stack at %#lx: %s\n",
				   c->name, want, strerror(err));
	if (want != c->alt_lo)
		ksft_print_msg("%s: %#lx was taken, alternate stack at %#lx\n", c->name,
			       c->alt_lo, want);
	c->alt_lo = want;
	return alt;
}

FRAME void measure(struct case_arg *c, enum mode mode, unsigned long gated, struct res *r)
{
	struct perf_event_attr attr;
	struct dc_stats before, after;
	struct dc_log log = { 0 };
	struct run_arg arg = { .c = c, .gated = gated };
	void *alt = NULL;
	pid_t pid;
	int err;

	memset(r, 0, sizeof(*r));
	arg.sh = mmap(NULL, sizeof(*arg.sh), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (arg.sh == MAP_FAILED)
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
	if (c->alt)
		alt = map_alt(c);
	if (mode == M_ON || mode == M_OFF) {
		err = dc_tables_set(mode == M_ON);
		if (err)
			ksft_exit_fail_msg("writing %s: %s\n", DC_TABLES_SYSCTL, strerror(-err));
	}
	r->have_stats = dc_stats_read(&before);
	dc_attr_init(&attr, PERIOD_NS, true);
	pid = dc_profile_child(run_victims, &arg, &attr, RING_PAGES, &log);
	NO_TAIL();
	if (pid < 0)
		ksft_exit_fail_msg("%s, %s: profiling the child: %s\n", c->name,
				   mode_name[mode], strerror(-pid));
	if (arg.sh->err)
		ksft_exit_fail_msg("%s, %s: the child's set-up: %s\n", c->name,
				   mode_name[mode], strerror(arg.sh->err));
	if (r->have_stats && dc_stats_read(&after)) {
		size_t n = 0;

		for (int i = 0; i < after.n; i++) {
			uint64_t was = 0;
			int64_t delta;

			dc_stats_get(&before, after.name[i], &was);
			delta = after.val[i] - was;
			if (!strcmp(after.name[i], "table_frames"))
				r->table_frames = delta;
			if (delta && n < sizeof(r->stats))
				n += snprintf(r->stats + n, sizeof(r->stats) - n, " %s %+lld",
					      after.name[i], (long long)delta);
		}
	}
	r->sh = *arg.sh;
	munmap(arg.sh, sizeof(*arg.sh));
	if (alt)
		munmap(alt, ALT_SIZE);
	analyze(c, mode, &log, pid, r);
	dc_log_free(&log);
}

static double pct(size_t a, size_t b)
{
	return b ? 100.0 * a / b : 0;
}

static void report(const struct case_arg *c, enum mode mode, unsigned long gated,
		   const struct res *r)
{
	bool nonuser_ok = mode != M_ON && !is_rust;
	const struct shared *s = &r->sh;
	bool stack_ok = c->alt ? s->on_alt == s->entries : !s->on_alt;
	bool inv;

	ksft_print_msg("FIGURES %s, %s: samples %zu, records %zu; handler entries %lu (%lu with getppid, %lu on the alternate stack), descents %lu; exact: handler's getppid %zu of %zu (%.1f%%), handler %zu of %zu (%.1f%%), victim %zu of %zu (%.1f%%), %zu samples in none of these; getppid records reaching the sigreturn frame %.1f%%, of one entry %.1f%%; stats:%s\n",
		       c->name, mode_name[mode], r->samples, r->records, s->entries,
		       s->gated, s->on_alt, s->descents,
		       r->exact[C_LEAF], r->cls[C_LEAF], pct(r->exact[C_LEAF], r->cls[C_LEAF]),
		       r->exact[C_HANDLER], r->cls[C_HANDLER],
		       pct(r->exact[C_HANDLER], r->cls[C_HANDLER]),
		       r->exact[C_VICTIM], r->cls[C_VICTIM],
		       pct(r->exact[C_VICTIM], r->cls[C_VICTIM]), r->unclassed,
		       pct(r->sigframe, r->cls[C_LEAF]), pct(r->one_entry, r->cls[C_LEAF]),
		       r->have_stats ? (r->stats[0] ? r->stats : " unchanged") : " none");
	if (r->nonuser && nonuser_ok)
		ksft_print_msg("%s, %s: %zu records with a non-user address (upstream records what a frame-pointer walk of frameless code reads: docs/deviations.md)\n",
			       c->name, mode_name[mode], r->nonuser);
	inv = s->gated >= gated && stack_ok && !s->int_on_alt &&
	      r->samples >= MIN_SAMPLES && r->cls[C_LEAF] >= MIN_LEAF && !r->bad_pid &&
	      !r->bad_ctx && !r->missing && !r->dup && !r->orphan && !r->bad_rec &&
	      !r->kaddr && (nonuser_ok || !r->nonuser) && !r->lost && !r->malformed;
	ksft_test_result(inv,
			 "%s, %s: handler entered %lu times, %lu with its getppid loop (>= %lu), %lu on the alternate stack (%s), %lu interrupted on it; %zu samples (>= %d), %zu in the handler's getppid (>= %d); every cookie one record (%zu missing, %zu twice, %zu final stop), %zu records without sample, %zu bad, %zu with a kernel address, %zu non-user%s, %llu lost, %llu malformed\n",
			 c->name, mode_name[mode], s->entries, s->gated, gated,
			 s->on_alt, c->alt ? "all of them" : "none", s->int_on_alt,
			 r->samples, MIN_SAMPLES, r->cls[C_LEAF], MIN_LEAF, r->missing,
			 r->dup, r->stopping, r->orphan, r->bad_rec, r->kaddr, r->nonuser,
			 nonuser_ok ? " (allowed on C)" : "",
			 (unsigned long long)r->lost, (unsigned long long)r->malformed);
	if (mode != M_ON)
		return;
	ksft_test_result(r->cls[C_LEAF] >= MIN_LEAF &&
			 r->exact[C_LEAF] * 100 >= r->cls[C_LEAF] * 99,
			 "%s, %s: %zu of %zu records in the handler's getppid (%.1f%%, >= 99%%) are exactly the chain through the signal frame to _start\n",
			 c->name, mode_name[mode], r->exact[C_LEAF], r->cls[C_LEAF],
			 pct(r->exact[C_LEAF], r->cls[C_LEAF]));
	ksft_test_result(r->have_stats && r->table_frames > 0,
			 "%s, %s: stats table_frames grew (%+lld)\n", c->name,
			 mode_name[mode], (long long)r->table_frames);
}

/* ---------------- the cases ---------------- */

/*
 * getppid() calls that take about HANDLER_US of CPU time here: the
 * fastest of 50 rounds of 20 calls (a round the host preempted the guest
 * in only looks slower).
 */
static unsigned int calibrate(void)
{
	uint64_t best = UINT64_MAX;

	for (int round = 0; round < 50; round++) {
		struct timespec a, b;
		uint64_t ns;

		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
		for (int i = 0; i < 20; i++)
			getppid();
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
		ns = (b.tv_sec - a.tv_sec) * 1000000000ULL + b.tv_nsec - a.tv_nsec;
		if (ns && ns < best)
			best = ns;
	}
	return 20 * (uint64_t)HANDLER_US * 1000 / best + 1;
}

/*
 * An address ALT_SIZE bytes long above the thread's stack (its VMA in
 * /proc/self/maps), as far above it as fits below the top of the user
 * address space (at most 1 GiB), with a gap of at least 1 MiB; 0 if none.
 */
static unsigned long above_stack(void)
{
	uint64_t top = sizeof(long) == 4 ? 0xffffe000ULL : DC_USER_MAX;
	unsigned long long lo, hi, end = 0;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "[stack]") && sscanf(line, "%llx-%llx", &lo, &hi) == 2)
			end = hi;
	if (f)
		fclose(f);
	if (!end)
		return 0;
	for (uint64_t gap = 1ULL << 30; gap >= 1ULL << 20; gap >>= 2) {
		uint64_t at = end + gap;
		void *p;

		if (at + ALT_SIZE > top)
			continue;
		p = mmap((void *)(uintptr_t)at, ALT_SIZE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (p == MAP_FAILED)
			continue;
		munmap(p, ALT_SIZE);
		if (p == (void *)(uintptr_t)at)
			return at;
	}
	return 0;
}

static struct case_arg cases[] = {
	{ .name = "thread stack" },
	{ .name = "sigaltstack below", .alt = true, .alt_lo = ALT_LOW },
#ifdef __x86_64__
	{ .name = "sigaltstack above", .alt = true, .high = true },
#endif
};
#define NR_CASES ((int)ARRAY_SIZE(cases))

int main(int argc, char **argv)
{
	unsigned long gated = argc > 1 ? strtoul(argv[1], NULL, 0) : GATED;
	enum mode modes[2];
	int nmodes, err;
	bool tables;
	char buf[4096];
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	ksft_print_header();
	if (dc_syms_load())
		ksft_exit_fail_msg("cannot read own symbol table\n");
	err = dc_dso_find(&vdso_dso, 0, "[vdso]");
	if (err)
		ksft_exit_fail_msg("the vDSO's symbols: %s\n", strerror(-err));
#ifdef __x86_64__
	err = dc_dso_find(&libc_dso, 0, "libc.so.6");
	if (err || !libc_dso.nsyms)
		ksft_exit_fail_msg("no libc.so.6 mapping with symbols (not linked dynamically?): %s\n",
				   strerror(-err));
	{
		/* __restore_rt: the code after sigaction()'s, in libc */
		uint64_t sa = dc_dso_sym(&libc_dso, "__libc_sigaction", NULL);
		const uint8_t *p = (const uint8_t *)(uintptr_t)(sa + libc_dso.bias);
		bool found = false;

		for (int i = 1; sa && i < 64 && !found; i++)
			found = is_sigret((uintptr_t)(p - i));
		if (!found)
			ksft_exit_fail_msg("no \"mov $15,%%rax; syscall\" before __libc_sigaction in libc\n");
	}
#else
	{
		uint64_t sr = dc_dso_sym(&vdso_dso, "__kernel_rt_sigreturn", NULL);

		if (!sr || !is_sigret(sr + vdso_dso.bias))
			ksft_exit_fail_msg("no __kernel_rt_sigreturn \"mov $173,%%eax; int $0x80\" in the vDSO\n");
	}
#endif
	dc_kallsyms_load();
	is_rust = dc_rust_kernel();
	tables = dc_tables_present();
	if (tables) {
		if (dc_tables_hold() < 0)
			ksft_exit_fail_msg("cannot read %s\n", DC_TABLES_SYSCTL);
		modes[0] = M_OFF;
		modes[1] = M_ON;
		nmodes = 2;
	} else {
		modes[0] = M_ASIS;
		nmodes = 1;
	}
	build_chains();
	handler_calls = calibrate();
	for (int c = 0; c < NR_CASES; c++) {
		if (!cases[c].high)
			continue;
		cases[c].alt_lo = above_stack();
		if (!cases[c].alt_lo)
			ksft_exit_fail_msg("no room for a %d KiB mapping above the stack\n",
					   ALT_SIZE / 1024);
	}
	ksft_print_msg("%s kernel, %s; libc %s (bias %#llx, %zu functions), vdso %zu functions; each run until %lu handler runs (at most %d ms of CPU), SIGALRM every %d us, %u getppid() calls per handler (about %d us)\n",
		       is_rust ? "Rust" : "upstream C",
		       tables ? "table unwinding present (tables off, then on)" :
		       "no " DC_TABLES_SYSCTL ": frame pointers only",
		       libc_dso.path[0] ? libc_dso.path : "static",
		       (unsigned long long)libc_dso.bias, libc_dso.nsyms,
		       vdso_dso.nsyms, gated, MAX_MS, TIMER_US, handler_calls, HANDLER_US);
	for (int c = 0; c < NR_CASES; c++)
		ksft_print_msg("case %s: %s%#lx\n", cases[c].name,
			       cases[c].alt ? "alternate stack at " : "no alternate stack, ",
			       cases[c].alt_lo);
	chain_str(chains[C_LEAF][3 * DEPTH - 1], buf, sizeof(buf));
	ksft_print_msg("chain of the handler's getppid, interrupted in the innermost victim: %s\n",
		       buf);
	chain_str(chains[C_LEAF][0], buf, sizeof(buf));
	ksft_print_msg("... in the outermost: %s\n", buf);
	ksft_set_plan(NR_CASES * (nmodes + 2));

	for (int c = 0; c < NR_CASES; c++) {
		for (int m = 0; m < nmodes; m++) {
			struct res r;

			measure(&cases[c], modes[m], gated, &r);
			report(&cases[c], modes[m], gated, &r);
		}
		if (tables)
			continue;
		if (is_rust) {
			ksft_test_result_fail("%s: the Rust kernel has no %s: no table unwinding to test (fail closed)\n",
					      cases[c].name, DC_TABLES_SYSCTL);
			ksft_test_result_fail("%s: stats table_frames: no table unwinding\n",
					      cases[c].name);
		} else {
			ksft_test_result_skip("%s: the chain through the signal frame: the upstream C kernel unwinds by frame pointers only\n",
					      cases[c].name);
			ksft_test_result_skip("%s: stats table_frames: no table unwinding on the upstream C kernel\n",
					      cases[c].name);
		}
	}
	dc_tables_restore();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ksft_print_msg("%.1f s in all\n", t1.tv_sec - t0.tv_sec + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	dc_finished();
}
