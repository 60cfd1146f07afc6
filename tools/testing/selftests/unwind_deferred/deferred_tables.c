// SPDX-License-Identifier: GPL-2.0
/*
 * Deferred user callchains of code built without frame pointers, unwound
 * by the objects' .eh_frame tables (the Rust unwinder's table mode,
 * sysctl kernel.unwind_user_tables; task_work context only).
 *
 * This program is built -O2 -fomit-frame-pointer (no frame pointer in our
 * code, none in glibc either), linked dynamically against glibc and
 * -no-pie, so that its own symbol table names its frames at their final
 * addresses; libc.so.6's frames are named by its .dynsym (load bias from
 * /proc/self/maps), the vDSO's by its own .dynsym in memory.  A child
 * (dc_profile_child(), per-task cpu-clock at 10 kHz, defer_callchain)
 * runs each workload until it has used its CPU time:
 *
 *  qsort:  qsort() on 64 ints with a comparator that calls getppid().
 *          glibc's qsort() is "xor %r8d,%r8d; jmp qsort_r", so qsort is
 *          never a frame; msort_with_tmp (local) recurses in libc:
 *          getppid <- sort_cmp <- (libc x1+) <- qsort_r <- sort_run <-
 *          run_sort <- TAIL
 *  read:   libc's read() of 64 KiB from /dev/zero, from caller_a, _b and
 *          _c, each called only by path_a, _b, _c: read <- caller_X <-
 *          path_X <- read_run <- run_read <- TAIL, X the same letter twice
 *          (the syscall wrapper's direct caller, which a frame-pointer
 *          walk from the frameless wrapper loses)
 *  deep:   a recursion 200 frames deep, then system calls:
 *          deep_leaf <- recurse x200 <- run_deep <- TAIL
 *  TAIL:   dc_profile_child <- measure <- main <- (libc: the local
 *          __libc_start_call_main, exactly one) <- __libc_start_main <-
 *          _start, the end of the stack (its CFI leaves the return address
 *          undefined).
 *
 * The i386 build (deferred_tables_32, static: i386 glibc calls the
 * kernel through the vDSO's __kernel_vsyscall) runs read and deep; there
 * read's chain starts __kernel_vsyscall [vdso] <- read, and TAIL ends
 * main <- __libc_start_call_main <- __libc_start_main <- _start, all
 * named by its own symbol table.
 *
 * A workload's leaf samples are those whose record starts in the leaf
 * (getppid, read, deep_leaf; on i386 __kernel_vsyscall inside ksys_read),
 * but for the child's start-up read() (dc_profile_child() waits for its
 * go in read(), which returns with the event enabled), known by its exact
 * chain read <- dc_profile_child <- measure <- ... and counted apart.
 * With /proc/sys/kernel/unwind_user_tables present (the Rust kernel
 * with table unwinding), each workload runs with tables off, then on;
 * the original setting is restored at exit.  Asserted with tables on: at
 * least 99% of the leaf samples (of at least MIN_LEAF) merge to exactly
 * the chain, whole length; no read sample loses caller_X; the stats file's
 * table_frames grew.  In every mode: every sample ends with
 * PERF_CONTEXT_USER_DEFERRED + cookie, every cookie has exactly one record
 * of the child (but the final-stop sample, see deferred_task.c), every
 * record has a sample, is MISC_USER, non-empty, with no kernel address
 * and (on Rust, or with tables on) no other non-user one (upstream C
 * records the garbage a frame-pointer walk of frameless code reads:
 * docs/deviations.md, "Other deliberate differences"), nothing lost.
 * With tables off (or absent: upstream C, Rust without the feature) the
 * shape of the stacks is the documented outcome, printed, not asserted:
 * the share of exact chains, of leaf samples whose caller is lost, and of
 * records with none of our frames after the leaf.  A run with fewer than
 * MIN_LEAF leaf samples (a starved guest: the workload's CPU time counts
 * the time its vCPU did not run, and ends after a few entries) is run
 * again with twice the CPU time, twice at most, each repeat printed; the
 * last run is the one asserted.
 *
 * deferred_tables_fp and deferred_tables_fp_32 (-DDC_TABLES_FP) are this
 * program built -O2 -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer:
 * every function of ours pushes a frame record before it calls anything
 * (glibc still has none).  With tables on the chains are the ones above,
 * asserted the same way.  With tables off, and without table unwinding
 * (upstream C), the frame-pointer walk's chains are asserted (>= 99% of
 * the leaf records exactly), as found in this machine's glibc 2.36
 * (Debian 12) and checked on it by --selftest's own frame-pointer walk:
 *
 *  qsort:  getppid <- (libc: msort_with_tmp), the end.  getppid is
 *          "mov $0x6e,%eax; syscall; ret": %rbp is sort_cmp's frame, whose
 *          record returns into msort_with_tmp (sort_cmp is skipped) and
 *          holds msort_with_tmp's %rbp, a count of elements (n2), not a
 *          frame pointer: below the stack pointer, so the walk ends.
 *  read:   read <- path_X <- read_run <- run_read <- FPTAIL: read (single
 *          threaded: "cmpb __libc_single_threaded; xor %eax,%eax; syscall;
 *          ret") leaves %rbp alone, caller_X is skipped.  i386:
 *          __kernel_vsyscall [vdso] <- path_X <- ...: the system call's
 *          regs hold read's %ebp (after sysenter or syscall the one
 *          __kernel_vsyscall stashed), which read does not touch: caller_X's
 *          frame, so read and caller_X are skipped.
 *  deep:   deep_leaf <- recurse x200 <- run_deep <- FPTAIL (a sample in
 *          deep_leaf's prologue or epilogue drops one recurse: rare).
 *  FPTAIL: dc_profile_child <- measure <- main <- __libc_start_call_main
 *          (libc's local one; i386: the binary's own), the end: in both
 *          libc.so.6 and i386's static glibc __libc_start_main holds argc
 *          in %ebp and __libc_start_call_main keeps it, so main's record
 *          holds argc as the caller's frame pointer.
 *  The start-up read: read <- measure <- FPTAIL's rest (i386:
 *          __kernel_vsyscall <- measure ...): dc_profile_child is skipped.
 *
 * And the agreement, asserted on every leaf record (at least MIN_LEAF):
 * a frame-pointer record is, in order, a subsequence of the table chain
 * (the frames the walk could not see left out, nothing else read), and a
 * tables-on record contains the frame-pointer chain in order.  The one
 * exception is i386 user-mode samples at __kernel_vsyscall's sysenter or
 * syscall instruction, after "mov %esp,%ebp" or "mov %ecx,%ebp" (which
 * one the kernel patched in depends on the CPU; found in the vDSO): with
 * sysenter the walk reads the saved %edx, READ_SIZE, as a return address,
 * then goes on from the caller's frame (asserted: that entry, then a
 * subsequence); with syscall %ebp is the buffer, below the stack pointer,
 * and the record is the leaf alone (asserted).
 *
 * --selftest (a development aid for this machine, whose kernel has no
 * defer_callchain): each workload runs in this process under a 1 ms
 * ITIMER_PROF; the handler takes glibc's backtrace() (libgcc's unwinder,
 * the same tables) from the interrupted PC, and those stacks go through
 * the same checks as the tables-on records (runner selftest_run instead
 * of dc_profile_child).  In the FP build the handler also walks the
 * interrupted registers by frame pointers as the kernel does (reads by
 * process_vm_readv); each workload runs twice: those stacks checked as
 * the tables-off records, then libgcc's as the tables-on ones; in every
 * sample of both runs the frame-pointer walk's addresses must be, in
 * order, among libgcc's from the same context.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include "../kselftest.h"
#include "dc_util.h"

#define PERIOD_NS	100000		/* 10 kHz */
#define RING_PAGES	1024		/* 4 MiB: records of 200+ entries */
#define DEFAULT_MS	1000		/* CPU time of each workload run */
#define MIN_SAMPLES	40
#define MIN_LEAF	20
#define SORT_N		64		/* 256 bytes: merge sort, buffer on the stack */
#define READ_SIZE	65536
#define DEPTH		200
#define KERNEL_MIN	0xffff800000000000ULL	/* x86-64 kernel half */
#define MAX_PAT		(DEPTH + 32)

/* Keep the compiler from turning calls into tail jumps. */
#define NO_TAIL() asm volatile("" ::: "memory")
/* A frame of its own name: no inlining, cloning, identical-code folding. */
#define FRAME __attribute__((noipa))

#ifdef DC_TABLES_FP
static const bool fp_build = true;	/* deferred_tables_fp(_32) */
#else
static const bool fp_build;
#endif

/* ---------- the workloads (no frame pointers but in the FP build) ---------- */

struct ts {
	long sec, nsec;	/* the native ABI of __NR_clock_gettime */
};

/* The thread's CPU time (see workload.c), with no libc or vDSO frame. */
static inline __attribute__((always_inline)) uint64_t cpu_ms(void)
{
	struct ts t;

	dc_syscall3(__NR_clock_gettime, 3 /* CLOCK_THREAD_CPUTIME_ID */, (long)&t, 0);
	return (uint64_t)t.sec * 1000 + t.nsec / 1000000;
}

struct wl_arg {
	unsigned int ms;
	int fd;		/* /dev/zero, opened by the parent */
	char *buf;	/* READ_SIZE bytes */
};

FRAME int sort_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	getppid();	/* through libc: the leaf is libc's getppid */
	return (x > y) - (x < y);
}

FRAME uint64_t sort_run(unsigned int ms)
{
	uint64_t end = cpu_ms() + ms, sorts = 0;
	uint32_t seed = 1;
	int a[SORT_N];

	do {
		for (int i = 0; i < SORT_N; i++) {
			seed = seed * 1103515245 + 12345;
			a[i] = seed >> 8;
		}
		qsort(a, SORT_N, sizeof(a[0]), sort_cmp);
		sorts++;
	} while (cpu_ms() < end);
	return sorts;
}

FRAME void run_sort(void *arg)
{
	sort_run(((struct wl_arg *)arg)->ms);
	NO_TAIL();
}

#define CALLER(x)							\
FRAME ssize_t caller_##x(int fd, char *buf)				\
{									\
	ssize_t r = read(fd, buf, READ_SIZE);				\
									\
	NO_TAIL();							\
	return r;							\
}									\
FRAME ssize_t path_##x(int fd, char *buf)				\
{									\
	ssize_t r = caller_##x(fd, buf);				\
									\
	NO_TAIL();							\
	return r;							\
}
CALLER(a)
CALLER(b)
CALLER(c)

FRAME uint64_t read_run(const struct wl_arg *a)
{
	uint64_t end = cpu_ms() + a->ms, bytes = 0;

	do {
		bytes += path_a(a->fd, a->buf);
		bytes += path_b(a->fd, a->buf);
		bytes += path_c(a->fd, a->buf);
	} while (cpu_ms() < end);
	return bytes;
}

FRAME void run_read(void *arg)
{
	read_run(arg);
	NO_TAIL();
}

FRAME uint64_t deep_leaf(unsigned int ms)
{
	uint64_t end = cpu_ms() + ms, calls = 0;

	do {
		for (int i = 0; i < 64; i++) {
			dc_syscall3(__NR_getppid, 0, 0, 0);
			calls++;
		}
	} while (cpu_ms() < end);
	return calls;
}

FRAME uint64_t recurse(int n, unsigned int ms)
{
	uint64_t r = n > 1 ? recurse(n - 1, ms) : deep_leaf(ms);

	NO_TAIL();	/* no tail call, no accumulator loop */
	return r + 1;
}

FRAME void run_deep(void *arg)
{
	recurse(DEPTH, ((struct wl_arg *)arg)->ms);
	NO_TAIL();
}

/* ---------------- libc and vDSO symbols ---------------- */

/*
 * libc's and the vDSO's mappings from /proc/self/maps (the children are
 * forked from this process: the same), and their symbols: libc.so.6 read
 * from the file maps names, the vDSO from memory.
 */
static struct dc_dso libc_dso, vdso_dso;

static int maps_load(void)
{
	int err = dc_dso_find(&libc_dso, 0, "libc.so.6");

	if (err && err != -ENOENT)
		return err;
	err = dc_dso_find(&vdso_dso, 0, "[vdso]");
	return err == -ENOENT ? 0 : err;
}

/*
 * i386: the address of __kernel_vsyscall's sysenter or syscall instruction
 * (patched in as "mov %esp,%ebp; sysenter" or "mov %ecx,%ebp; syscall"),
 * the one instruction at which %ebp is not the caller's; 0 if neither.
 */
static uint64_t vsys_insn;
static bool vsys_sysenter;

static void vsys_find(void)
{
	for (size_t i = 0; sizeof(long) == 4 && i < vdso_dso.nsyms; i++) {
		const struct dc_dsym *s = &vdso_dso.syms[i];
		const uint8_t *p = (const uint8_t *)(uintptr_t)(s->addr + vdso_dso.bias);

		if (strcmp(s->name, "__kernel_vsyscall"))
			continue;
		for (uint64_t k = 0; k + 4 <= s->size; k++) {
			if (p[k] != 0x89 || p[k + 2] != 0x0f)
				continue;
			if ((p[k + 1] == 0xe5 && p[k + 3] == 0x34) ||
			    (p[k + 1] == 0xcd && p[k + 3] == 0x05)) {
				vsys_insn = (uintptr_t)(p + k + 2);
				vsys_sysenter = p[k + 1] == 0xe5;
				return;
			}
		}
	}
}

/* ---------------- expected chains ---------------- */

enum obj { OBJ_END, OBJ_EXE, OBJ_LIBC, OBJ_VDSO };

/* @min to @max consecutive frames in @obj named @name (NULL: see below) */
struct pat {
	enum obj obj;
	const char *name;
	int min, max;
};

#define EXE(n)		{ OBJ_EXE, n, 1, 1 }
#define EXE_X(n, k)	{ OBJ_EXE, n, k, k }
#define LIBC(n)		{ OBJ_LIBC, n, 1, 1 }
/* libc frames in functions with no exported name (local functions) */
#define LIBC_LOCAL	{ OBJ_LIBC, NULL, 1, 1 }
#define LIBC_LOCALS	{ OBJ_LIBC, NULL, 1, DC_MAX_IPS }
#define VDSO(n)		{ OBJ_VDSO, n, 1, 1 }
#define PAT_END		{ OBJ_END, NULL, 0, 0 }
/* a head that is the whole chain: no tail appended */
#define PAT_STOP	{ OBJ_END, NULL, 1, 1 }

/* Where every workload's chain ends (the child's runner is patched in). */
static struct pat tail[] = {
	EXE("dc_profile_child"), EXE("measure"), EXE("main"),
#ifdef __x86_64__
	LIBC_LOCAL /* __libc_start_call_main */, LIBC("__libc_start_main"),
#else
	EXE("__libc_start_call_main"), EXE("__libc_start_main"),
#endif
	EXE("_start"), PAT_END
};

/*
 * The frame-pointer walk's tail (the FP build with tables off, or without
 * table unwinding): main's frame record holds the return address into
 * __libc_start_call_main and, as the caller's frame pointer, what %rbp
 * held there, which is no frame pointer (see the comment at the top).
 */
static struct pat tail_fp[] = {
	EXE("dc_profile_child"), EXE("measure"), EXE("main"),
#ifdef __x86_64__
	LIBC_LOCAL /* __libc_start_call_main */,
#else
	EXE("__libc_start_call_main"),
#endif
	PAT_END
};

#ifdef __x86_64__
static const struct pat head_sort[] = {
	LIBC("getppid"), EXE("sort_cmp"), LIBC_LOCALS /* msort_with_tmp */,
	LIBC("qsort_r"), EXE("sort_run"), EXE("run_sort"), PAT_END
};
#endif
#ifdef __x86_64__
#define READ_LEAF LIBC("read")
#else
#define READ_LEAF VDSO("__kernel_vsyscall"), EXE("read")
#endif
#define HEAD_READ(x) { READ_LEAF, EXE("caller_" #x), EXE("path_" #x), \
		       EXE("read_run"), EXE("run_read"), PAT_END }
static const struct pat head_read_a[] = HEAD_READ(a);
static const struct pat head_read_b[] = HEAD_READ(b);
static const struct pat head_read_c[] = HEAD_READ(c);
static const struct pat head_deep[] = {
	EXE("deep_leaf"), EXE_X("recurse", DEPTH), EXE("run_deep"), PAT_END
};

#ifdef DC_TABLES_FP
/*
 * The frame-pointer walk of the FP build: the frameless libc wrapper's
 * direct caller is skipped (the wrapper leaves %rbp as its caller set it,
 * so the first frame record read is the caller's); on x86-64 qsort's walk
 * ends in msort_with_tmp, whose %rbp is a count; i386 skips read as well
 * (see the comment at the top).
 */
#ifdef __x86_64__
static const struct pat head_sort_fp[] = {
	LIBC("getppid"), LIBC_LOCAL /* msort_with_tmp */, PAT_STOP
};
#define READ_LEAF_FP LIBC("read")
#else
#define READ_LEAF_FP VDSO("__kernel_vsyscall")
#endif
#define HEAD_READ_FP(x) { READ_LEAF_FP, EXE("path_" #x), EXE("read_run"), \
			  EXE("run_read"), PAT_END }
static const struct pat head_read_a_fp[] = HEAD_READ_FP(a);
static const struct pat head_read_b_fp[] = HEAD_READ_FP(b);
static const struct pat head_read_c_fp[] = HEAD_READ_FP(c);
#define FP_HEADS(...) .fp_head = { __VA_ARGS__ }, .fp_startup_elems = 1
#else
#define FP_HEADS(...) .fp_startup_elems = 0
#endif

struct workload {
	const char *name;
	void (*fn)(void *arg);
	/* leaf samples in the kernel must have this function there too */
	const char *leaf_kfunc;
	int nchains;
	const struct pat *head[3];
	/* the first so many elements: the leaf's direct caller is kept */
	int caller_elems;
	bool assert_caller;
	/*
	 * The leaf's first so many elements, then the tail: the child's
	 * start-up read(), waiting for dc_profile_child()'s go, which returns
	 * with the event enabled.  Not a sample of the workload.
	 */
	int startup_elems;
	/*
	 * The FP build's chains as its frame-pointer walk sees them, one per
	 * head; its start-up read is the leaf's first so many elements, then
	 * tail_fp without the runner (the skipped caller).
	 */
	const struct pat *fp_head[3];
	int fp_startup_elems;
	struct pat chain[3][MAX_PAT];	/* head + tail */
	struct pat startup[MAX_PAT];
	struct pat fp_chain[3][MAX_PAT];	/* fp_head + tail_fp */
	struct pat fp_startup[MAX_PAT];
};

static struct workload workloads[] = {
#ifdef __x86_64__
	{ .name = "qsort", .fn = run_sort, .nchains = 1, .head = { head_sort },
	  .caller_elems = 2, FP_HEADS(head_sort_fp) },
	{ .name = "read", .fn = run_read, .nchains = 3,
	  .head = { head_read_a, head_read_b, head_read_c },
	  .caller_elems = 3, .assert_caller = true, .startup_elems = 1,
	  FP_HEADS(head_read_a_fp, head_read_b_fp, head_read_c_fp) },
#else
	/* raise()'s system calls at the end go through the vDSO too */
	{ .name = "read", .fn = run_read, .leaf_kfunc = "ksys_read", .nchains = 3,
	  .head = { head_read_a, head_read_b, head_read_c },
	  .caller_elems = 4, .assert_caller = true, .startup_elems = 2,
	  FP_HEADS(head_read_a_fp, head_read_b_fp, head_read_c_fp) },
#endif
	{ .name = "deep", .fn = run_deep, .nchains = 1, .head = { head_deep },
	  .caller_elems = 2, FP_HEADS(head_deep) },
};
#define NR_WORKLOADS (int)(sizeof(workloads) / sizeof(workloads[0]))

static uint64_t frame_addr(const uint64_t *ips, uint32_t i)
{
	return i ? ips[i] - 1 : ips[i];	/* return addresses: the call */
}

static bool frame_is(uint64_t a, const struct pat *p)
{
	switch (p->obj) {
	case OBJ_EXE:
		return dc_sym_is(a, p->name);
	case OBJ_LIBC:
		if (!dc_dso_has(&libc_dso, a))
			return false;
		return p->name ? !!dc_dso_name(&libc_dso, a, p->name, NULL) :
				 !dc_dso_name(&libc_dso, a, NULL, NULL);
	case OBJ_VDSO:
		return dc_dso_has(&vdso_dso, a) &&
		       (!p->name || dc_dso_name(&vdso_dso, a, p->name, NULL));
	default:
		return false;
	}
}

/*
 * Do frames @i.. of @ips match the pattern @p (and end with it, unless
 * @prefix)?  *@where: the furthest frame a failed match reached.
 */
static bool match(const struct pat *p, const uint64_t *ips, uint32_t nr,
		  uint32_t i, bool prefix, uint32_t *where)
{
	if (p->obj == OBJ_END) {
		if (!prefix && i != nr && i > *where)
			*where = i;
		return prefix || i == nr;
	}
	for (int k = 0;; k++, i++) {
		if (k >= p->min && match(p + 1, ips, nr, i, prefix, where))
			return true;
		if (k >= p->max || i >= nr || !frame_is(frame_addr(ips, i), p)) {
			if (i > *where)
				*where = i;
			return false;
		}
	}
}

/*
 * Is the record a subsequence of the chain @p: its frames, in order, each
 * one of @p's (a walk that skipped some of the chain's frames, and read
 * no other)?  Greedy: each frame takes the first element that can have it.
 */
static bool rec_in_chain(const struct pat *p, const uint64_t *ips, uint32_t nr,
			 uint32_t skip)
{
	int used = 0;	/* frames taken by element *p */

	for (uint32_t i = 0; i < nr; i++) {
		uint64_t a = frame_addr(ips, i);

		if (i == skip)	/* an entry that is no frame */
			continue;

		while (p->obj != OBJ_END && (used >= p->max || !frame_is(a, p))) {
			p++;
			used = 0;
		}
		if (p->obj == OBJ_END)
			return false;
		used++;
	}
	return true;
}

/* Does the record contain the chain @p (each element's minimum) in order? */
static bool chain_in_rec(const struct pat *p, const uint64_t *ips, uint32_t nr)
{
	uint32_t i = 0;

	for (; p->obj != OBJ_END; p++) {
		for (int k = 0; k < p->min; k++, i++) {
			while (i < nr && !frame_is(frame_addr(ips, i), p))
				i++;
			if (i == nr)
				return false;
		}
	}
	return true;
}

static void pat_str(const struct pat *p, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (; p->obj != OBJ_END && n < len; p++) {
		char one[96];

		if (p->obj == OBJ_LIBC && !p->name)
			snprintf(one, sizeof(one), "(libc%s)", p->max > 1 ? " x1+" : "");
		else if (p->obj == OBJ_VDSO)
			snprintf(one, sizeof(one), "%s [vdso]", p->name ? p->name : "");
		else
			snprintf(one, sizeof(one), "%s%s%.0d%s", p->name,
				 p->min > 1 ? " x" : "", p->min > 1 ? p->min : 0,
				 p->obj == OBJ_LIBC ? " [libc]" : "");
		n += snprintf(buf + n, len - n, "%s%s", n ? " <- " : "", one);
	}
}

/* @head's first @nhead elements (up to its end), then @tail unless PAT_STOP */
static void build_chain(struct pat *out, const struct pat *head, int nhead,
			const struct pat *tail)
{
	int n = 0;

	for (; n < nhead && head[n].obj != OBJ_END; n++)
		out[n] = head[n];
	if (n < nhead && head[n].min) {	/* PAT_STOP */
		out[n] = (struct pat)PAT_END;
		return;
	}
	for (const struct pat *p = tail; n < MAX_PAT - 1; p++) {
		out[n++] = *p;
		if (p->obj == OBJ_END)
			break;
	}
}

static void build_chains(const char *runner)
{
	tail[0].name = runner;
	tail_fp[0].name = runner;
	for (int w = 0; w < NR_WORKLOADS; w++) {
		struct workload *wl = &workloads[w];

		for (int c = 0; c < wl->nchains; c++)
			build_chain(wl->chain[c], wl->head[c], MAX_PAT, tail);
		build_chain(wl->startup, wl->head[0], wl->startup_elems, tail);
		if (!fp_build)
			continue;
		for (int c = 0; c < wl->nchains; c++)
			build_chain(wl->fp_chain[c], wl->fp_head[c], MAX_PAT, tail_fp);
		/* the wrapper's caller, the runner, is skipped */
		build_chain(wl->fp_startup, wl->fp_head[0], wl->fp_startup_elems,
			    tail_fp + 1);
	}
}

/* ---------------- printing ---------------- */

static const char *frame_name(uint64_t a, const char **where, uint64_t *off)
{
	const char *n;

	*off = 0;
	*where = "";
	if ((n = dc_sym(a, off)))
		return n;
	if (dc_dso_has(&libc_dso, a)) {
		*where = " [libc]";
		n = dc_dso_name(&libc_dso, a, NULL, off);
		if (!n)
			*off = a - libc_dso.bias;	/* for addr2line */
		return n ? n : "libc.so.6";
	}
	if (dc_dso_has(&vdso_dso, a)) {
		*where = " [vdso]";
		n = dc_dso_name(&vdso_dso, a, NULL, off);
		return n ? n : "vdso";
	}
	return "?";
}

/* The merged stack; runs of frames of one function of ours collapsed. */
static void print_merged(const struct dc_sample *s, const struct dc_deferred *d)
{
	printf("#   sample pid %u tid %u cookie %#llx, record of %u entries\n",
	       s->pid, s->tid, (unsigned long long)s->cookie, d ? d->nr : 0);
	for (uint32_t i = 0; i < s->nr_kernel; i++)
		printf("#     %016llx %s [kernel]\n",
		       (unsigned long long)s->kernel[i], dc_ksym(s->kernel[i]));
	for (uint32_t i = 0, n; d && i < d->nr; i += n) {
		const char *where, *name, *ours;
		uint64_t off;

		name = frame_name(frame_addr(d->ips, i), &where, &off);
		ours = dc_sym(frame_addr(d->ips, i), NULL);
		for (n = 1; ours && i + n < d->nr &&
			    dc_sym(frame_addr(d->ips, i + n), NULL) == ours; n++)
			;
		printf("#     %016llx %s+%#llx%s", (unsigned long long)d->ips[i],
		       name, (unsigned long long)(off + !!i), where);
		if (n > 1)
			printf(" (x%u)", n);
		printf("\n");
	}
}

/* ---------------- one run ---------------- */

enum mode { M_ASIS, M_OFF, M_ON, M_SELFTEST, M_SELFTEST_FP };
static const char *const mode_name[] = {
	"no table unwinding on this kernel", "tables off", "tables on",
	"selftest (libgcc unwinder)", "selftest (frame-pointer walk)"
};

static bool is_rust, selftest;

/* Does @mode walk the FP build by frame pointers (the fp_chain expected)? */
static bool fp_walk(enum mode mode)
{
	return fp_build && (mode == M_ASIS || mode == M_OFF || mode == M_SELFTEST_FP);
}

/* Are the chains asserted in @mode (else only printed)? */
static bool strict(enum mode mode)
{
	return mode == M_ON || mode == M_SELFTEST || fp_walk(mode);
}

struct res {
	size_t samples, leaf, exact, caller_lost, broken, startup;
	size_t bad_pid, bad_ctx, missing, dup, stopping, orphan;
	size_t records, bad_rec, kaddr, nonuser;
	/*
	 * FP build: leaf records that agree with the other walk; of the FP
	 * walk's, those at i386 __kernel_vsyscall's sysenter/syscall
	 */
	size_t agree, vsys;
	/* --selftest of the FP build: samples whose two walks were compared */
	size_t pairs, pairs_ok;
	uint64_t lost, malformed;
	bool have_stats;
	int64_t table_frames;
	char stats[512];	/* counters that changed */
	/*
	 * Leaf records that are not the chain, told apart for the failure
	 * message (CI shows it, not the log): distinct records, those that
	 * are a prefix of it (the walk ended early), and the first one.
	 */
	size_t bad_recs, bad_prefix;
	uint64_t bad_cookies[64];
	char bad_first[192];
};

/*
 * ---- --selftest: the same stacks from libgcc's unwinder in a SIGPROF
 * handler; in the FP build also from the kernel's frame-pointer walk,
 * done here over the interrupted context's registers ----
 */

static struct {
	uint64_t *ips;
	uint32_t *nr;
	size_t n, cap;
	bool fp;		/* keep the frame-pointer walk, not libgcc's */
	/* FP build: samples whose two walks were compared, and agreed */
	size_t pairs, pairs_ok;
	struct dc_deferred bad_fp, bad_bt;	/* the first that did not */
} st;

#ifdef DC_TABLES_FP
/* One word pair of this process, or false where the kernel's read faults. */
static bool st_read(uint64_t addr, unsigned long w[2])
{
	struct iovec l = { w, 2 * sizeof(long) };
	struct iovec r = { (void *)(uintptr_t)addr, 2 * sizeof(long) };

	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == 2 * sizeof(long);
}

/*
 * The deferred frame-pointer walk (src/logic/walk.rs; upstream's
 * kernel/unwind/user.c but for the user-address check) from the
 * interrupted @ip, @sp and @fp: the CFA is fp + 2 words and must be above
 * sp and aligned, the return address and the caller's frame pointer are
 * the two words below it; a frame pointer below sp, a fault or a return
 * address that is no user address ends the walk.
 */
static uint32_t fp_walk_regs(uint64_t ip, uint64_t sp, uint64_t fp,
			     uint64_t *out, uint32_t max)
{
	const uint64_t ws = sizeof(long);
	const uint64_t limit = ws == 4 ? 1ULL << 32 : DC_USER_MAX;
	uint32_t n = 0;

	out[n++] = ip;
	while (n < max) {
		unsigned long w[2];	/* the caller's frame pointer, return address */
		uint64_t cfa = fp + 2 * ws;

		if (fp < sp || cfa <= sp || cfa >= limit || (cfa & (ws - 1)) ||
		    !st_read(fp, w) || w[1] >= limit)
			break;
		out[n++] = w[1];
		sp = cfa;
		fp = w[0];
	}
	return n;
}

/* Are @fp's addresses, in order, among @bt's, both from the same ip? */
static bool addr_subseq(const uint64_t *fp, uint32_t nfp, const uint64_t *bt,
			uint32_t nbt)
{
	uint32_t j = 0;

	if (!nfp || !nbt || fp[0] != bt[0])
		return false;
	for (uint32_t i = 1; i < nfp; i++) {
		while (++j < nbt && bt[j] != fp[i])
			;
		if (j >= nbt)
			return false;
	}
	return true;
}
#endif

static void st_handler(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	void *bt[DC_MAX_IPS];
	uint64_t pc, *out;
	int n, i, j = 0;
#ifdef DC_TABLES_FP
	uint64_t fpips[DC_MAX_IPS];
	uint32_t nfp;
#endif

#ifdef __x86_64__
	pc = uc->uc_mcontext.gregs[REG_RIP];
#ifdef DC_TABLES_FP
	nfp = fp_walk_regs(pc, uc->uc_mcontext.gregs[REG_RSP],
			   uc->uc_mcontext.gregs[REG_RBP], fpips, DC_MAX_IPS);
#endif
#else
	pc = (uint32_t)uc->uc_mcontext.gregs[REG_EIP];
#ifdef DC_TABLES_FP
	nfp = fp_walk_regs(pc, (uint32_t)uc->uc_mcontext.gregs[REG_UESP],
			   (uint32_t)uc->uc_mcontext.gregs[REG_EBP], fpips, DC_MAX_IPS);
#endif
#endif
	if (st.n == st.cap)
		return;
	n = backtrace(bt, DC_MAX_IPS);
	for (i = 0; i < n && (uintptr_t)bt[i] != pc; i++)
		;
	out = st.ips + st.n * DC_MAX_IPS;
	for (; i < n; i++)
		out[j++] = (uintptr_t)bt[i];
	st.nr[st.n++] = j;
#ifdef DC_TABLES_FP
	st.pairs++;
	if (addr_subseq(fpips, nfp, out, j)) {
		st.pairs_ok++;
	} else if (!st.bad_fp.nr) {
		st.bad_fp.nr = nfp;
		memcpy(st.bad_fp.ips, fpips, nfp * sizeof(fpips[0]));
		st.bad_bt.nr = j;
		memcpy(st.bad_bt.ips, out, j * sizeof(out[0]));
	}
	if (st.fp) {
		memcpy(out, fpips, nfp * sizeof(fpips[0]));
		st.nr[st.n - 1] = nfp;
	}
#endif
}

FRAME pid_t selftest_run(void (*fn)(void *arg), void *arg,
			 struct perf_event_attr *attr, size_t ring_pages,
			 struct dc_log *log)
{
	struct sigaction sa = { .sa_sigaction = st_handler, .sa_flags = SA_SIGINFO | SA_RESTART };
	struct itimerval it = { { 0, 1000 }, { 0, 1000 } }, off = { { 0, 0 }, { 0, 0 } };
	void *warm[4];

	backtrace(warm, 4);	/* loads libgcc_s outside the handler */
	st.n = st.pairs = st.pairs_ok = st.bad_fp.nr = 0;
	st.cap = 2000;
	st.ips = calloc(st.cap, DC_MAX_IPS * sizeof(*st.ips));
	st.nr = calloc(st.cap, sizeof(*st.nr));
	if (!st.ips || !st.nr || sigaction(SIGPROF, &sa, NULL) ||
	    setitimer(ITIMER_PROF, &it, NULL))
		return -errno;
	fn(arg);
	NO_TAIL();
	setitimer(ITIMER_PROF, &off, NULL);
	log->samples = calloc(st.n + 1, sizeof(*log->samples));
	log->deferred = calloc(st.n + 1, sizeof(*log->deferred));
	if (!log->samples || !log->deferred)
		return -ENOMEM;
	for (size_t i = 0; i < st.n; i++) {
		struct dc_sample *s = &log->samples[i];
		struct dc_deferred *d = &log->deferred[i];

		s->pid = s->tid = d->pid = d->tid = getpid();
		s->cookie = d->cookie = i + 1;
		s->ends_deferred = true;
		d->misc = PERF_RECORD_MISC_USER;
		d->nr = st.nr[i];
		memcpy(d->ips, st.ips + i * DC_MAX_IPS, d->nr * sizeof(d->ips[0]));
	}
	log->nr_samples = log->nr_deferred = st.n;
	free(st.ips);
	free(st.nr);
	return getpid();
}

/* Does the record hold a frame of ours or libc's named @name (an alias too)? */
static bool rec_has_func(const struct dc_deferred *d, const char *name)
{
	for (uint32_t j = 0; j < d->nr; j++) {
		uint64_t a = frame_addr(d->ips, j);

		if (dc_sym_is(a, name) ||
		    (dc_dso_has(&libc_dso, a) && dc_dso_name(&libc_dso, a, name, NULL)))
			return true;
	}
	return false;
}

/*
 * Is the record's first frame in the workload's leaf?  A sample in the
 * kernel must be in the leaf's system call.  One in user mode is, but for
 * the child's final raise(SIGSTOP) (dc_profile_child()), whose getpid()
 * also starts at __kernel_vsyscall on i386: known by raise in its record.
 */
static bool is_leaf(const struct workload *w, const struct dc_sample *s,
		    const struct dc_deferred *d)
{
	if (!d->nr || !frame_is(d->ips[0], &w->chain[0][0]))	/* fp_chain's too */
		return false;
	if (!w->leaf_kfunc)
		return true;
	if (s->nr_kernel)
		return dc_kernel_stack_has(s, w->leaf_kfunc);
	return !rec_has_func(d, "raise");
}

/*
 * Count a leaf record that is not the chain once (by cookie), whether it
 * is a prefix of the chain, and describe the first: what a failure says.
 */
static void note_bad(const struct workload *w, struct res *r, const struct dc_sample *s,
		     const struct dc_deferred *d, const struct pat (*chain)[MAX_PAT],
		     uint32_t where)
{
	size_t n = r->bad_recs < 64 ? r->bad_recs : 64;
	bool prefix = false;
	const char *name, *obj = "";
	uint64_t off = 0;

	for (size_t k = 0; k < n; k++)
		if (r->bad_cookies[k] == s->cookie)
			return;
	if (r->bad_recs < 64)
		r->bad_cookies[r->bad_recs] = s->cookie;
	r->bad_recs++;
	for (int c = 0; c < w->nchains && !prefix; c++) {
		uint32_t wh = 0;

		prefix = match(chain[c], d->ips, d->nr, 0, true, &wh);
	}
	r->bad_prefix += prefix;
	if (r->bad_first[0])
		return;
	name = where < d->nr ? frame_name(frame_addr(d->ips, where), &obj, &off) : "(end)";
	snprintf(r->bad_first, sizeof(r->bad_first),
		 "tid %u cookie %#llx, %u entries, %s; from entry %u (%s%s+%#llx)",
		 s->tid, (unsigned long long)s->cookie, d->nr,
		 prefix ? "a prefix of the chain" : "not a prefix", where, name,
		 where < d->nr ? obj : "", (unsigned long long)off);
}

static void analyze(const struct workload *w, enum mode mode, struct dc_log *log,
		    pid_t pid, struct res *r)
{
	uint64_t user_max = sizeof(long) == 4 ? 1ULL << 32 : DC_USER_MAX;
	int print_bad = strict(mode) ? 3 : 1, print_disagree = 3;
	bool print_good = strict(mode);
	bool fpw = fp_walk(mode);
	const struct pat (*chain)[MAX_PAT] = fpw ? w->fp_chain : w->chain;
	const struct pat *startup = fpw ? w->fp_startup : w->startup;
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
		bool exact = false, caller = false, ours = false;
		uint32_t where = 0;
		long idx, n;

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
					       w->name, mode_name[mode], i,
					       (unsigned long long)s->cookie);
				print_merged(s, NULL);
			}
			continue;
		}
		if (n > 1)
			r->dup++;
		d = &log->deferred[idx];
		d->matched++;
		if (!is_leaf(w, s, d))
			continue;
		if (w->startup_elems && !selftest &&
		    match(startup, d->ips, d->nr, 0, false, &where)) {
			r->startup++;
			continue;
		}
		where = 0;
		r->leaf++;
		for (int c = 0; c < w->nchains; c++) {
			struct pat pre[8];
			uint32_t wh = 0;

			exact = exact || match(chain[c], d->ips, d->nr, 0, false, &where);
			/* the table walk's caller, a figure for the FP walk */
			memcpy(pre, w->chain[c], w->caller_elems * sizeof(pre[0]));
			pre[w->caller_elems] = (struct pat)PAT_END;
			caller = caller || match(pre, d->ips, d->nr, 0, true, &wh);
		}
		for (uint32_t j = 1; j < d->nr && !ours; j++)
			ours = dc_sym(frame_addr(d->ips, j), NULL) != NULL;
		r->exact += exact;
		r->caller_lost += !caller;
		r->broken += !ours;
		if (fp_build) {
			/* i386, at __kernel_vsyscall's sysenter/syscall: see the top */
			bool vsys = fpw && vsys_insn && d->ips[0] == vsys_insn;
			bool agree = false;

			r->vsys += vsys;
			if (vsys && !vsys_sysenter) {	/* %ebp is the buffer */
				agree = d->nr == 1;
			} else if (!vsys || (d->nr >= 2 && d->ips[1] == READ_SIZE)) {
				/* sysenter: the saved %edx, the count, then the chain */
				for (int c = 0; c < w->nchains && !agree; c++)
					agree = fpw ? rec_in_chain(w->chain[c], d->ips, d->nr,
								   vsys ? 1 : UINT32_MAX) :
						      chain_in_rec(w->fp_chain[c], d->ips, d->nr);
			}
			r->agree += agree;
			if (!agree && print_disagree) {
				print_disagree--;
				ksft_print_msg("%s, %s: leaf sample %zu disagrees with the %s walk's chain:\n",
					       w->name, mode_name[mode], i,
					       fpw ? "table" : "frame-pointer");
				print_merged(s, d);
			}
		}
		if (exact && print_good) {
			print_good = false;
			ksft_print_msg("%s, %s: first exact leaf record:\n", w->name,
				       mode_name[mode]);
			print_merged(s, d);
		}
		if (!exact)
			note_bad(w, r, s, d, chain, where);
		if (!exact && print_bad) {
			print_bad--;
			ksft_print_msg("%s, %s: leaf sample %zu not the chain (from entry %u of %u):\n",
				       w->name, mode_name[mode], i, where, d->nr);
			print_merged(s, d);
		}
	}
	for (size_t i = 0; i < log->nr_deferred; i++) {
		struct dc_deferred *d = &log->deferred[i];
		bool k = false, nu = false;

		r->orphan += !d->matched;
		r->bad_rec += d->misc != PERF_RECORD_MISC_USER || !d->nr;
		for (uint32_t j = 0; j < d->nr; j++) {
			k = k || d->ips[j] >= KERNEL_MIN;
			nu = nu || (d->ips[j] >= user_max && d->ips[j] < KERNEL_MIN);
		}
		if ((k || nu) && r->kaddr + r->nonuser < 2) {
			ksft_print_msg("%s, %s: record with a %s address:\n", w->name,
				       mode_name[mode], k ? "kernel" : "non-user");
			print_merged(&(struct dc_sample){ .pid = d->pid, .tid = d->tid,
					.cookie = d->cookie }, d);
		}
		r->kaddr += k;
		r->nonuser += nu;
	}
	free(keys);
}

FRAME void measure(struct workload *w, enum mode mode, unsigned int ms, struct res *r)
{
	struct wl_arg arg = { .ms = ms };
	struct perf_event_attr attr;
	struct dc_stats before, after;
	struct dc_log log = { 0 };
	pid_t pid;
	int err;

	memset(r, 0, sizeof(*r));
	arg.fd = open("/dev/zero", O_RDONLY);
	arg.buf = malloc(READ_SIZE);
	if (arg.fd < 0 || !arg.buf)
		ksft_exit_fail_msg("/dev/zero: %s\n", strerror(errno));
	memset(arg.buf, 1, READ_SIZE);
	if (mode == M_ON || mode == M_OFF) {
		err = dc_tables_set(mode == M_ON);
		if (err)
			ksft_exit_fail_msg("writing %s/tables: %s\n", DC_UW_DIR, strerror(-err));
	}
	r->have_stats = !selftest && dc_stats_read(&before);
	dc_attr_init(&attr, PERIOD_NS, true);
	st.fp = mode == M_SELFTEST_FP;
	if (selftest)
		pid = selftest_run(w->fn, &arg, &attr, RING_PAGES, &log);
	else
		pid = dc_profile_child(w->fn, &arg, &attr, RING_PAGES, &log);
	NO_TAIL();
	if (pid < 0)
		ksft_exit_fail_msg("%s, %s: profiling the child: %s\n", w->name,
				   mode_name[mode], strerror(-pid));
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
	close(arg.fd);
	free(arg.buf);
	r->pairs = st.pairs;
	r->pairs_ok = st.pairs_ok;
	if (st.pairs != st.pairs_ok) {
		ksft_print_msg("%s, %s: a sample whose frame-pointer walk is not a subsequence of libgcc's:\n",
			       w->name, mode_name[mode]);
		print_merged(&(struct dc_sample){ .cookie = 0 }, &st.bad_fp);
		print_merged(&(struct dc_sample){ .cookie = 0 }, &st.bad_bt);
	}
	analyze(w, mode, &log, pid, r);
	dc_log_free(&log);
}

static double pct(size_t a, size_t b)
{
	return b ? 100.0 * a / b : 0;
}

/* The figures and assertions of one workload in one mode. */
static void report(const struct workload *w, enum mode mode, const struct res *r)
{
	bool fpw = fp_walk(mode);
	bool nonuser_ok = (mode == M_ASIS || mode == M_OFF) && !is_rust;
	char agree[64] = "";
	bool inv;

	if (fp_build)
		snprintf(agree, sizeof(agree), ", agree %.1f%%", pct(r->agree, r->leaf));
	ksft_print_msg("FIGURES %s, %s: samples %zu, leaf %zu (+%zu of the start-up read), exact %.1f%%, caller lost %.1f%%, broken %.1f%%%s; records %zu; stats:%s\n",
		       w->name, mode_name[mode], r->samples, r->leaf, r->startup,
		       pct(r->exact, r->leaf), pct(r->caller_lost, r->leaf),
		       pct(r->broken, r->leaf), agree, r->records,
		       r->have_stats ? (r->stats[0] ? r->stats : " unchanged") : " none");
	if (r->nonuser && nonuser_ok)
		ksft_print_msg("%s, %s: %zu records with a non-user address (upstream records what a frame-pointer walk of frameless code reads: docs/deviations.md)\n",
			       w->name, mode_name[mode], r->nonuser);
	inv = r->samples >= MIN_SAMPLES && r->leaf >= MIN_LEAF && !r->bad_pid &&
	      !r->bad_ctx && !r->missing && !r->dup && !r->orphan && !r->bad_rec &&
	      !r->kaddr && (nonuser_ok || !r->nonuser) && !r->lost && !r->malformed;
	if (!strict(mode)) {
		ksft_test_result(inv,
				 "%s, %s: %zu samples, %zu in the leaf (>= %d): exact chain %.1f%%, caller lost %.1f%%, none of our frames after the leaf %.1f%% (stack shape not asserted); every cookie one record (%zu missing, %zu twice, %zu final stop), %zu records without sample, %zu bad, %zu with a kernel address, %zu non-user%s, %llu lost, %llu malformed\n",
				 w->name, mode_name[mode], r->samples, r->leaf, MIN_LEAF,
				 pct(r->exact, r->leaf), pct(r->caller_lost, r->leaf),
				 pct(r->broken, r->leaf), r->missing, r->dup, r->stopping,
				 r->orphan, r->bad_rec, r->kaddr, r->nonuser,
				 nonuser_ok ? " (allowed on C)" : "",
				 (unsigned long long)r->lost, (unsigned long long)r->malformed);
		return;
	}
	ksft_test_result(inv,
			 "%s, %s: %zu samples, %zu in the leaf (>= %d); every cookie one record (%zu missing, %zu twice, %zu final stop), %zu records without sample, %zu bad, %zu with a kernel or non-user address, %llu lost, %llu malformed\n",
			 w->name, mode_name[mode], r->samples, r->leaf, MIN_LEAF,
			 r->missing, r->dup, r->stopping, r->orphan, r->bad_rec,
			 r->kaddr + r->nonuser, (unsigned long long)r->lost,
			 (unsigned long long)r->malformed);
	ksft_test_result(r->leaf >= MIN_LEAF && r->exact * 100 >= r->leaf * 99,
			 "%s, %s: %zu of %zu leaf records (%.1f%%, >= 99%%) are exactly the %schain%s%zu records not (%zu a prefix of it)%s%s\n",
			 w->name, mode_name[mode], r->exact, r->leaf, pct(r->exact, r->leaf),
			 fpw ? "frame-pointer " : "", "; ", r->bad_recs, r->bad_prefix,
			 r->bad_first[0] ? "; first: " : "", r->bad_first);
	if (fp_build && fpw)
		ksft_test_result(r->leaf >= MIN_LEAF && r->agree == r->leaf,
				 "%s, %s: every leaf record agrees with the table walk: %zu of %zu are its chain less frames the frame-pointer walk cannot see, in order (%zu at i386 __kernel_vsyscall's system call instruction, in its shape)\n",
				 w->name, mode_name[mode], r->agree, r->leaf, r->vsys);
	else if (fp_build)
		ksft_test_result(r->leaf >= MIN_LEAF && r->agree == r->leaf,
				 "%s, %s: every leaf record agrees with the frame-pointer walk: %zu of %zu hold its chain, in order\n",
				 w->name, mode_name[mode], r->agree, r->leaf);
	if (fp_build && selftest)
		ksft_test_result(r->pairs >= MIN_SAMPLES && r->pairs_ok == r->pairs,
				 "%s, %s: in every sample (%zu of %zu), the frame-pointer walk's addresses are a subsequence of libgcc's from the same context\n",
				 w->name, mode_name[mode], r->pairs_ok, r->pairs);
	if (w->assert_caller && !fpw)
		ksft_test_result(r->leaf >= MIN_LEAF && !r->caller_lost,
				 "%s, %s: no leaf record loses the wrapper's direct caller (%zu of %zu do)\n",
				 w->name, mode_name[mode], r->caller_lost, r->leaf);
	if (mode == M_ON)
		ksft_test_result(r->have_stats && r->table_frames > 0,
				 "%s, %s: stats table_frames grew (%+lld)\n",
				 w->name, mode_name[mode], (long long)r->table_frames);
}

int main(int argc, char **argv)
{
	enum mode modes[2];
	unsigned int ms = DEFAULT_MS;
	int nmodes, plan = 0;
	char buf[4096];

	selftest = argc > 1 && !strcmp(argv[1], "--selftest");
	if (argc > 1 + selftest)
		ms = atoi(argv[1 + selftest]);

	ksft_print_header();
	if (dc_syms_load())
		ksft_exit_fail_msg("cannot read own symbol table\n");
	if (maps_load())
		ksft_exit_fail_msg("cannot read libc's or the vDSO's symbols\n");
#ifdef __x86_64__
	if (!libc_dso.nsyms)
		ksft_exit_fail_msg("no libc.so.6 mapping with symbols (not linked dynamically?)\n");
#else
	if (!vdso_dso.nsyms)
		ksft_exit_fail_msg("no vDSO with symbols\n");
#endif
	build_chains(selftest ? "selftest_run" : "dc_profile_child");
	vsys_find();

	if (selftest && fp_build) {
		modes[0] = M_SELFTEST_FP;	/* as tables off */
		modes[1] = M_SELFTEST;
		nmodes = 2;
	} else if (selftest) {
		modes[0] = M_SELFTEST;
		nmodes = 1;
	} else {
		dc_kallsyms_load();
		is_rust = dc_rust_kernel();
		/*
		 * Fail closed: the Rust test kernels are built with the table
		 * walk, so a Rust kernel without its switch is a broken build,
		 * not a kernel to measure by frame pointers only.
		 */
		if (is_rust && !dc_tables_present())
			ksft_exit_fail_msg("Rust kernel without %s: the table walk is missing\n",
					   DC_TABLES_SYSCTL);
		if (dc_tables_present()) {
			if (dc_tables_hold() < 0)
				ksft_exit_fail_msg("cannot read %s/tables\n", DC_UW_DIR);
			modes[0] = M_OFF;
			modes[1] = M_ON;
			nmodes = 2;
		} else {
			modes[0] = M_ASIS;
			nmodes = 1;
		}
	}
	ksft_print_msg("%s kernel, %s; libc %s (bias %#llx, %zu functions), vdso %zu functions; %u ms of CPU per run\n",
		       selftest ? "no" : is_rust ? "Rust" : "upstream C",
		       selftest ? (fp_build ? "selftest of the frame-pointer build" : "selftest") :
		       fp_build ? (nmodes == 2 ?
		       "frame-pointer build, table unwinding present (tables off, then on)" :
		       "frame-pointer build, no " DC_UW_DIR "/tables: the frame-pointer walk") :
		       nmodes == 2 ?
		       "table unwinding present (tables off, then on)" :
		       "no " DC_UW_DIR "/tables: only frame pointers measured",
		       libc_dso.path[0] ? libc_dso.path : "static",
		       (unsigned long long)libc_dso.bias, libc_dso.nsyms,
		       vdso_dso.nsyms, ms);
	for (int w = 0; w < NR_WORKLOADS; w++) {
		for (int m = 0; m < nmodes; m++)
			plan += !strict(modes[m]) ? 1 :
				2 + (workloads[w].assert_caller && !fp_walk(modes[m])) +
				(modes[m] == M_ON) + fp_build + (fp_build && selftest);
		for (int c = 0; c < workloads[w].nchains; c++) {
			pat_str(workloads[w].chain[c], buf, sizeof(buf));
			ksft_print_msg("%s chain: %s\n", workloads[w].name, buf);
		}
		if (workloads[w].startup_elems && !selftest) {
			pat_str(workloads[w].startup, buf, sizeof(buf));
			ksft_print_msg("%s start-up read, not counted: %s\n",
				       workloads[w].name, buf);
		}
		for (int c = 0; fp_build && c < workloads[w].nchains; c++) {
			pat_str(workloads[w].fp_chain[c], buf, sizeof(buf));
			ksft_print_msg("%s frame-pointer chain: %s\n", workloads[w].name, buf);
		}
		if (fp_build && workloads[w].startup_elems && !selftest) {
			pat_str(workloads[w].fp_startup, buf, sizeof(buf));
			ksft_print_msg("%s frame-pointer start-up read, not counted: %s\n",
				       workloads[w].name, buf);
		}
	}
	if (fp_build && sizeof(long) == 4)
		ksft_print_msg("__kernel_vsyscall's system call instruction: %s at %#llx\n",
			       !vsys_insn ? "none (int $0x80 only)" :
			       vsys_sysenter ? "sysenter" : "syscall",
			       (unsigned long long)vsys_insn);
	ksft_set_plan(plan);

	for (int w = 0; w < NR_WORKLOADS; w++) {
		for (int m = 0; m < nmodes; m++) {
			unsigned int run_ms = ms;
			struct res r;

			measure(&workloads[w], modes[m], run_ms, &r);
			/*
			 * Too few leaf samples: the guest's clock ran while its
			 * vCPU did not (a loaded host), and the workload's CPU
			 * time, which counts that time, ran out after a few
			 * entries.  Run it longer, twice at most; what is
			 * asserted is the last run's.
			 */
			for (int again = 0; again < 2 && r.leaf < MIN_LEAF; again++) {
				ksft_print_msg("%s, %s: %zu leaf samples of %zu in %zu records (< %d) in %u ms of CPU: again with %u ms\n",
					       workloads[w].name, mode_name[modes[m]], r.leaf,
					       r.samples, r.records, MIN_LEAF, run_ms, 2 * run_ms);
				run_ms *= 2;
				measure(&workloads[w], modes[m], run_ms, &r);
			}
			report(&workloads[w], modes[m], &r);
		}
	}
	dc_tables_restore();
	dc_finished();
}
