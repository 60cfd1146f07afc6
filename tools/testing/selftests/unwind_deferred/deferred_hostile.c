// SPDX-License-Identifier: GPL-2.0
/*
 * Hostile user stacks end the deferred walk cleanly, with exactly the
 * entries the walk rules give.
 *
 * Each case maps memory, writes a crafted frame chain into it and forks a
 * child that points its stack and frame pointers (%rsp/%rbp, or %esp/%ebp
 * in the compat build deferred_hostile_32) at it and then, with no libc
 * call in between (hl_loop below, assembly), loops on large reads of
 * /dev/zero made with raw `syscall` (`int $0x80`), each followed by a
 * short user-mode spin, until the parent says stop; only then are the
 * registers restored.  A per-task cpu-clock event
 * with defer_callchain=1 samples the child.  The walk of each kernel entry
 * starts at the loop's user registers: the instruction pointer is
 * hl_ret, just after the system call instruction (or, for a sample taken
 * in user mode inside the loop, the interrupted instruction, which is the
 * sample's IP), the stack pointer below the crafted chain, the frame
 * pointer at its first frame.
 *
 * Both kernels use the same rules (kernel/unwind/user.c and
 * src/logic/walk.rs), x86's frame-pointer frame: CFA = fp + 2 words,
 * return address at CFA - 1 word, caller's fp at CFA - 2 words; a step
 * needs fp >= sp, a CFA above sp and word-aligned, and both words
 * readable.  They differ where docs/deviations.md says: the Rust walk
 * stops before a return address that is not a user address (upstream
 * records it), and adds the segment bases of a compat task (upstream
 * does not).  Each case states the exact record per kernel.
 *
 * Checked for every case: every sample of the child carries a cookie, and
 * each cookie exactly one PERF_RECORD_CALLCHAIN_DEFERRED of the child;
 * every record has a sample, is MISC_USER and holds user addresses only
 * (below TASK_SIZE_MAX, 4 GiB for compat; the one exception is upstream's
 * documented recording of a non-user return address, stated exactly);
 * nothing is lost; every record of a kernel entry in the loop is exactly
 * the expected one, its whole length (the race case: a prefix of the true
 * chain, and at least one record must have ended early), and a record of
 * a sample taken in user mode in the loop starts at the sample's IP; at
 * least MIN_LOOP_RECORDS such records were seen, or the case fails.  The
 * child stops itself (SIGSTOP) once done, and is continued and stopped
 * again until no sample of it waits for a record (see run_case()): no
 * sample is excused.
 *
 * The uprobe case stops a task at a function's first instruction (perf's
 * uprobe PMU, sample_period 1), the LDT case (compat only) runs the loop
 * in code and stack segments of the task's own LDT with non-zero bases.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
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
#include <asm/ldt.h>

#include "../kselftest.h"
#include "dc_util.h"

#define PERIOD_NS		250000		/* 4 kHz */
#define RING_PAGES		256
#define READ_SIZE		(256 << 10)
#define SPIN			200000	/* user-mode loop iterations per read */
#define WANT_LOOP_RECORDS	20	/* stop the loop once this many */
#define MIN_LOOP_RECORDS	5	/* fewer: the case saw too little */
#define MIN_RUN_MS		150
#define MAX_RUN_MS		6000
#define CASE_TIMEOUT_MS		30000
#define STOP_RETRIES		20
#define UPROBE_CALLS		40
#define PAGE			4096UL

/* Entries of the per-task unwind cache: one page (docs/design.md, src/cache.rs). */
#define CACHE_ENTRIES		510

typedef unsigned long word;	/* a user word: 8 bytes, 4 for compat */
#define W			sizeof(word)

#ifdef __x86_64__
#define USER_LIMIT	DC_USER_MAX	/* TASK_SIZE_MAX, 4- or 5-level paging */
#define KERNEL_MIN	0xffff800000000000ULL
/* Addresses that are no user address. */
#define BAD_KERNEL	0xffffffff81000000UL
#define BAD_NONCANON	0x8000000000000000UL
#define RA_LAST_USER	0x00007fffffffefffUL
#define RA_FIRST_NONUSER 0x00007ffffffff000UL
#else
#define USER_LIMIT	0x100000000ULL		/* all of 32 bits */
#define KERNEL_MIN	0xffff800000000000ULL
/* Above the compat TASK_SIZE (0xffffe000): never mapped in a compat task. */
#define BAD_KERNEL	0xffffe000UL
/* A frame that would end past 4 GiB. */
#define BAD_NONCANON	0xfffffffcUL
#define RA_LAST_USER	0xffffefffUL
#define RA_FIRST_NONUSER 0xffffffffUL
#endif

/* Marker return addresses: user addresses that are easy to recognise. */
#define RA(i)		((word)0x5a000000 + (word)(i) * 0x10)

/*
 * What the assembly loop reads, one word each (the offsets are written
 * into the assembly below; checked by the static asserts).
 */
struct hl_args {
	word fp;		/*  0: frame pointer in the loop */
	word sp;		/*  1: stack pointer in the loop */
	word stop;		/*  2: address of an int: non-zero ends the loop */
	word nr;		/*  3: system call number */
	word a0, a1, a2;	/*  4-6: its arguments */
	word saved_sp;		/*  7: the real stack pointer (LDT: with saved_ss, for lss) */
	word saved_ss;		/*  8 */
	word calls;		/*  9: system calls made */
	word ldt_sp, ldt_ss;	/* 10-11: lss into the LDT stack segment */
	word ldt_ip, ldt_cs;	/* 12-13: far jump into the LDT code segment */
	word back_ip, back_cs;	/* 14-15: far jump back to the flat code segment */
	word spin;		/* 16: user-mode iterations after each system call */
};

_Static_assert(__builtin_offsetof(struct hl_args, stop) == 2 * W, "hl_args");
_Static_assert(__builtin_offsetof(struct hl_args, saved_sp) == 7 * W, "hl_args");
_Static_assert(__builtin_offsetof(struct hl_args, calls) == 9 * W, "hl_args");
_Static_assert(__builtin_offsetof(struct hl_args, back_cs) == 15 * W, "hl_args");
_Static_assert(__builtin_offsetof(struct hl_args, spin) == 16 * W, "hl_args");

/*
 * hl_loop(args): set sp and fp, then system calls until *stop, each
 * followed by a user-mode spin (so that some samples interrupt the loop in
 * user mode), then put the registers back.  hl_in..hl_out is the part that runs on the crafted
 * registers; hl_ret is the return point of the system call.
 *
 * up_outer() -> up_caller() -> up_target(): the uprobe case's chain.
 * up_outer zeroes the frame pointer before its call, so the walk ends
 * after up_caller's frame.
 */
#ifdef __x86_64__
asm(".pushsection .text\n"
	".globl hl_loop\n"
	".type hl_loop, @function\n"
	"hl_loop:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	push %rbx\n"
	"	push %r12\n"
	"	mov %rdi, %rbx\n"
	"	mov %rsp, 56(%rbx)\n"
	"	mov 16(%rbx), %r12\n"
	"	mov 8(%rbx), %rsp\n"
	"	mov 0(%rbx), %rbp\n"
	".globl hl_in\n"
	"hl_in:\n"
	"1:	mov 24(%rbx), %rax\n"
	"	mov 32(%rbx), %rdi\n"
	"	mov 40(%rbx), %rsi\n"
	"	mov 48(%rbx), %rdx\n"
	"	syscall\n"
	".globl hl_ret\n"
	"hl_ret:\n"
	"	incq 72(%rbx)\n"
	"	mov 128(%rbx), %rcx\n"
	"	jrcxz 3f\n"
	"2:	loop 2b\n"
	"3:	cmpl $0, (%r12)\n"
	"	je 1b\n"
	".globl hl_out\n"
	"hl_out:\n"
	"	mov 56(%rbx), %rsp\n"
	"	lea 16(%rsp), %rbp\n"
	"	pop %r12\n"
	"	pop %rbx\n"
	"	pop %rbp\n"
	"	ret\n"
	".size hl_loop, . - hl_loop\n"
	".globl up_target\n"
	".type up_target, @function\n"
	"up_target:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	pop %rbp\n"
	"	ret\n"
	".size up_target, . - up_target\n"
	".globl up_caller\n"
	".type up_caller, @function\n"
	"up_caller:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	call up_target\n"
	".globl up_ret_caller\n"
	"up_ret_caller:\n"
	"	pop %rbp\n"
	"	ret\n"
	".size up_caller, . - up_caller\n"
	".globl up_outer\n"
	".type up_outer, @function\n"
	"up_outer:\n"
	"	push %rbp\n"
	"	xor %ebp, %ebp\n"
	"	call up_caller\n"
	".globl up_ret_outer\n"
	"up_ret_outer:\n"
	"	pop %rbp\n"
	"	ret\n"
	".size up_outer, . - up_outer\n"
	".popsection\n");
#else
asm(".pushsection .text\n"
	".globl hl_loop\n"
	".type hl_loop, @function\n"
	"hl_loop:\n"
	"	push %ebp\n"
	"	mov %esp, %ebp\n"
	"	push %ebx\n"
	"	push %esi\n"
	"	push %edi\n"
	"	mov 8(%ebp), %esi\n"
	"	mov %esp, 28(%esi)\n"
	"	mov 8(%esi), %edi\n"
	"	mov 4(%esi), %esp\n"
	"	mov 0(%esi), %ebp\n"
	".globl hl_in\n"
	"hl_in:\n"
	"1:	mov 12(%esi), %eax\n"
	"	mov 16(%esi), %ebx\n"
	"	mov 20(%esi), %ecx\n"
	"	mov 24(%esi), %edx\n"
	"	int $0x80\n"
	".globl hl_ret\n"
	"hl_ret:\n"
	"	incl 36(%esi)\n"
	"	mov 64(%esi), %ecx\n"
	"	jecxz 3f\n"
	"2:	loop 2b\n"
	"3:	cmpl $0, (%edi)\n"
	"	je 1b\n"
	".globl hl_out\n"
	"hl_out:\n"
	"	mov 28(%esi), %esp\n"
	"	lea 12(%esp), %ebp\n"
	"	pop %edi\n"
	"	pop %esi\n"
	"	pop %ebx\n"
	"	pop %ebp\n"
	"	ret\n"
	".size hl_loop, . - hl_loop\n"
	/*
	 * The same loop in the LDT's segments: lss to the LDT stack segment,
	 * far jump to the LDT code segment (hl_ldt_in runs at offset
	 * hl_ldt_in - code base there), far jump back, lss back.  Memory
	 * operands use %ds, which stays flat.
	 */
	".globl hl_ldt_loop\n"
	".type hl_ldt_loop, @function\n"
	"hl_ldt_loop:\n"
	"	push %ebp\n"
	"	mov %esp, %ebp\n"
	"	push %ebx\n"
	"	push %esi\n"
	"	push %edi\n"
	"	mov 8(%ebp), %esi\n"
	"	mov %esp, 28(%esi)\n"
	"	movl $0, 32(%esi)\n"
	"	mov %ss, 32(%esi)\n"
	"	movl $0, 60(%esi)\n"
	"	mov %cs, 60(%esi)\n"
	"	mov 8(%esi), %edi\n"
	"	lss 40(%esi), %esp\n"
	"	mov 0(%esi), %ebp\n"
	"	ljmp *48(%esi)\n"
	".globl hl_ldt_in\n"
	"hl_ldt_in:\n"
	"1:	mov 12(%esi), %eax\n"
	"	mov 16(%esi), %ebx\n"
	"	mov 20(%esi), %ecx\n"
	"	mov 24(%esi), %edx\n"
	"	int $0x80\n"
	".globl hl_ldt_ret\n"
	"hl_ldt_ret:\n"
	"	incl 36(%esi)\n"
	"	mov 64(%esi), %ecx\n"
	"	jecxz 3f\n"
	"2:	loop 2b\n"
	"3:	cmpl $0, (%edi)\n"
	"	je 1b\n"
	".globl hl_ldt_out\n"
	"hl_ldt_out:\n"
	"	ljmp *56(%esi)\n"
	".globl hl_ldt_back\n"
	"hl_ldt_back:\n"
	"	lss 28(%esi), %esp\n"
	"	lea 12(%esp), %ebp\n"
	"	pop %edi\n"
	"	pop %esi\n"
	"	pop %ebx\n"
	"	pop %ebp\n"
	"	ret\n"
	".size hl_ldt_loop, . - hl_ldt_loop\n"
	".globl up_target\n"
	".type up_target, @function\n"
	"up_target:\n"
	"	push %ebp\n"
	"	mov %esp, %ebp\n"
	"	pop %ebp\n"
	"	ret\n"
	".size up_target, . - up_target\n"
	".globl up_caller\n"
	".type up_caller, @function\n"
	"up_caller:\n"
	"	push %ebp\n"
	"	mov %esp, %ebp\n"
	"	call up_target\n"
	".globl up_ret_caller\n"
	"up_ret_caller:\n"
	"	pop %ebp\n"
	"	ret\n"
	".size up_caller, . - up_caller\n"
	".globl up_outer\n"
	".type up_outer, @function\n"
	"up_outer:\n"
	"	push %ebp\n"
	"	xor %ebp, %ebp\n"
	"	call up_caller\n"
	".globl up_ret_outer\n"
	"up_ret_outer:\n"
	"	pop %ebp\n"
	"	ret\n"
	".size up_outer, . - up_outer\n"
	".popsection\n");

void hl_ldt_loop(struct hl_args *a);
extern const char hl_ldt_in[], hl_ldt_ret[], hl_ldt_out[], hl_ldt_back[];
#endif

void hl_loop(struct hl_args *a);
extern const char hl_in[], hl_ret[], hl_out[];
void up_target(void);
void up_outer(void);
extern const char up_ret_caller[], up_ret_outer[];

/* ---- what a case expects ---- */

#define MAX_EXPECT	DC_MAX_IPS

struct expect {
	uint64_t ret;		/* first entry when sampled in the loop's system call */
	uint64_t in, out;	/* first entry when sampled in the loop in user mode */
	uint64_t ip_delta;	/* ... which is then the sample's IP - ip_delta */
	uint64_t ips[MAX_EXPECT];	/* the entries after the first */
	uint32_t n;
	bool prefix;		/* race: any prefix of ips[] (the walk may end early) */
	bool nonuser_ok;	/* upstream records a non-user address (exact record) */
	bool every_record;	/* every record of the child must be a loop record */
};

/* Shared by the parent and the case's child (MAP_SHARED). */
struct ctl {
	struct hl_args args;
	volatile int ready, go, stop;
	volatile int err;		/* the child's helper failed: errno */
	volatile unsigned long rounds;	/* the race helper's rounds */
};

struct hcase;
typedef int (*setup_fn)(const struct hcase *c, struct hl_args *a,
			struct expect *e, char *why, size_t whylen);

struct hcase {
	const char *name;
	const char *what;	/* what the record must be, for the TAP line */
	setup_fn setup;
	void (*run)(struct hl_args *a, struct ctl *ctl);	/* in the child */
	word arg;		/* the case's parameter */
};

static bool rust_kernel;
static struct ctl *ctl;
static int zero_fd;
static char *read_buf;

/* Mappings made for the current case, unmapped after it. */
static struct { void *p; size_t len; } maps[16];
static int nr_maps;

static void *map_at(void *addr, size_t len, int prot, int flags, int fd)
{
	void *p = mmap(addr, len, prot, flags, fd, 0);

	if (p == MAP_FAILED)
		return NULL;
	if (nr_maps < (int)ARRAY_SIZE(maps)) {
		maps[nr_maps].p = p;
		maps[nr_maps].len = len;
		nr_maps++;
	}
	return p;
}

static word map_anon(size_t len)
{
	return (word)map_at(NULL, len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1);
}

static void unmap_all(void)
{
	for (int i = 0; i < nr_maps; i++)
		munmap(maps[i].p, maps[i].len);
	nr_maps = 0;
}

static void put_frame(word at, word next_fp, word ra)
{
	memcpy((void *)at, &next_fp, W);
	memcpy((void *)(at + W), &ra, W);
}

static void expect_ras(struct expect *e, const word *ras, int n)
{
	for (int i = 0; i < n; i++)
		e->ips[i] = ras[i];
	e->n = n;
}

/* ---- the cases ---- */

/* The chain area: sp at its start, frames above. */
#define CHAIN_PAGES	4

static word chain_area(struct hl_args *a)
{
	word base = map_anon(CHAIN_PAGES * PAGE);

	if (base)
		a->sp = base + 0x100;
	return base;
}

/* fp = 0: the walk ends at once. */
static int setup_fp_zero(const struct hcase *c, struct hl_args *a,
			 struct expect *e, char *why, size_t whylen)
{
	if (!chain_area(a))
		return -errno;
	a->fp = 0;
	e->n = 0;
	return 0;
}

/* A frame whose saved fp points at itself. */
static int setup_self_loop(const struct hcase *c, struct hl_args *a,
			   struct expect *e, char *why, size_t whylen)
{
	word base = chain_area(a), f;

	if (!base)
		return -errno;
	f = base + 0x200;
	put_frame(f, f, RA(1));
	a->fp = f;
	expect_ras(e, (word[]){ RA(1) }, 1);
	return 0;
}

/* f1 -> f2 -> f1. */
static int setup_cycle(const struct hcase *c, struct hl_args *a,
		       struct expect *e, char *why, size_t whylen)
{
	word base = chain_area(a), f1, f2;

	if (!base)
		return -errno;
	f1 = base + 0x200;
	f2 = base + 0x400;
	put_frame(f1, f2, RA(1));
	put_frame(f2, f1, RA(2));
	a->fp = f1;
	expect_ras(e, (word[]){ RA(1), RA(2) }, 2);
	return 0;
}

/* f1 -> f2 -> f0 below f2 (f0 a valid-looking frame that must not be used). */
static int setup_downward(const struct hcase *c, struct hl_args *a,
			  struct expect *e, char *why, size_t whylen)
{
	word base = chain_area(a), f0, f1, f2;

	if (!base)
		return -errno;
	f0 = base + 0x200;
	f1 = base + 0x400;
	f2 = base + 0x800;
	put_frame(f0, 0, RA(9));
	put_frame(f1, f2, RA(1));
	put_frame(f2, f0, RA(2));
	a->fp = f1;
	expect_ras(e, (word[]){ RA(1), RA(2) }, 2);
	return 0;
}

/* f1 -> f2 + 1 (a valid-looking frame there that must not be used). */
static int setup_unaligned(const struct hcase *c, struct hl_args *a,
			   struct expect *e, char *why, size_t whylen)
{
	word base = chain_area(a), f1, f2;

	if (!base)
		return -errno;
	f1 = base + 0x200;
	f2 = base + 0x400 + 1;
	put_frame(f1, f2, RA(1));
	put_frame(f2, 0, RA(2));
	a->fp = f1;
	expect_ras(e, (word[]){ RA(1) }, 1);
	return 0;
}

/* f1 -> c->arg: an address that cannot be read (kernel, non-canonical...). */
static int setup_bad_link(const struct hcase *c, struct hl_args *a,
			  struct expect *e, char *why, size_t whylen)
{
	word base = chain_area(a), f1;

	if (!base)
		return -errno;
	f1 = base + 0x200;
	put_frame(f1, c->arg, RA(1));
	a->fp = f1;
	expect_ras(e, (word[]){ RA(1) }, 1);
	return 0;
}

/* The frame pointer register itself holds c->arg: no step at all. */
static int setup_bad_fp(const struct hcase *c, struct hl_args *a,
			struct expect *e, char *why, size_t whylen)
{
	if (!chain_area(a))
		return -errno;
	a->fp = c->arg;
	e->n = 0;
	return 0;
}

/* f1 -> a page that was mapped and unmapped again. */
static int setup_unmapped(const struct hcase *c, struct hl_args *a,
			  struct expect *e, char *why, size_t whylen)
{
	word base = chain_area(a), f1, hole;

	if (!base)
		return -errno;
	f1 = base + 0x200;
	hole = base + 2 * PAGE;
	if (munmap((void *)hole, PAGE))
		return -errno;
	put_frame(f1, hole + 0x100, RA(1));
	a->fp = f1;
	expect_ras(e, (word[]){ RA(1) }, 1);
	return 0;
}

/*
 * A mapping of two pages whose lower page is unmapped again, so that
 * nothing is mapped below it (a guard page).  Returns the lowest address.
 */
static word guarded_page(void)
{
	word m = map_anon(2 * PAGE);

	if (!m || munmap((void *)m, PAGE))
		return 0;
	return m + PAGE;
}

/* sp = fp = the lowest address of a mapping: the frame there is read. */
static int setup_guard_low(const struct hcase *c, struct hl_args *a,
			   struct expect *e, char *why, size_t whylen)
{
	word low = guarded_page();

	if (!low)
		return -errno;
	put_frame(low, 0, RA(1));
	a->sp = a->fp = low;
	expect_ras(e, (word[]){ RA(1) }, 1);
	return 0;
}

/*
 * sp = fp = one word below the lowest address of a mapping: the saved fp
 * is in the guard page, the return address in the mapping.  No entry.
 */
static int setup_straddle_low(const struct hcase *c, struct hl_args *a,
			      struct expect *e, char *why, size_t whylen)
{
	word low = guarded_page(), ra = RA(1);

	if (!low)
		return -errno;
	memcpy((void *)low, &ra, W);
	a->sp = a->fp = low - W;
	e->n = 0;
	return 0;
}

/*
 * A frame in the last word of a mapping with nothing mapped above: the
 * saved fp is readable, the return address is not.  No entry.
 */
static int setup_straddle_high(const struct hcase *c, struct hl_args *a,
			       struct expect *e, char *why, size_t whylen)
{
	word m = map_anon(2 * PAGE), fp, zero = 0;

	if (!m || munmap((void *)(m + PAGE), PAGE))
		return -errno;
	fp = m + PAGE - W;
	memcpy((void *)fp, &zero, W);
	a->sp = m;
	a->fp = fp;
	e->n = 0;
	return 0;
}

/*
 * f1 -> f2 -> f3 -> 0 with return addresses ras[0..2], ras[1] = c->arg
 * (ras[0] the last user address before it for the limit case).  Upstream
 * records every return address; the Rust walk stops before one that is
 * not a user address.
 */
static int setup_ra(const struct hcase *c, struct hl_args *a,
		    struct expect *e, char *why, size_t whylen)
{
	word base = chain_area(a), f1, f2, f3;
	word ras[3] = { c->arg == RA_FIRST_NONUSER ? RA_LAST_USER : RA(1),
			c->arg, RA(3) };

	if (!base)
		return -errno;
	f1 = base + 0x200;
	f2 = base + 0x400;
	f3 = base + 0x600;
	put_frame(f1, f2, ras[0]);
	put_frame(f2, f3, ras[1]);
	put_frame(f3, 0, ras[2]);
	a->fp = f1;
	if (rust_kernel && (uint64_t)c->arg >= USER_LIMIT) {
		expect_ras(e, ras, 1);
	} else {
		expect_ras(e, ras, 3);
		e->nonuser_ok = (uint64_t)c->arg >= USER_LIMIT;
	}
	return 0;
}

/* Several thousand valid frames: the record is the cache's capacity. */
#define LONG_FRAMES	3000

static int setup_long(const struct hcase *c, struct hl_args *a,
		      struct expect *e, char *why, size_t whylen)
{
	size_t len = (LONG_FRAMES * 2 * W + 0x200 + PAGE - 1) & ~(PAGE - 1);
	word base = map_anon(len), f;

	if (!base)
		return -errno;
	a->sp = base + 0x100;
	f = base + 0x200;
	a->fp = f;
	for (int i = 1; i <= LONG_FRAMES; i++, f += 2 * W)
		put_frame(f, i == LONG_FRAMES ? 0 : f + 2 * W, RA(i));
	for (int i = 0; i < CACHE_ENTRIES - 1; i++)
		e->ips[i] = RA(i + 1);
	e->n = CACHE_ENTRIES - 1;
	return 0;
}

/*
 * The race: RACE_FRAMES frames over RACE_PAGES pages of a memfd mapped
 * shared, so that a page mapped again has the same content.  A second
 * thread of the child unmaps and maps back, mprotects to PROT_NONE and
 * back, mremaps away and back, and maps again over the mapped page
 * (MAP_FIXED, which replaces it), each page in turn, while the first one
 * is sampled.  (No madvise(): the test kernels have no
 * CONFIG_ADVISE_SYSCALLS.)  Every record must be a prefix of
 * the true chain.
 */
#define RACE_PAGES	8
#define RACE_PER_PAGE	4
#define RACE_FRAMES	(RACE_PAGES * RACE_PER_PAGE)

static struct {
	word base, scratch;
	int memfd;
} race;

static int setup_race(const struct hcase *c, struct hl_args *a,
		      struct expect *e, char *why, size_t whylen)
{
	size_t len = RACE_PAGES * PAGE;
	word f[RACE_FRAMES];

	race.memfd = memfd_create("deferred_hostile", 0);
	if (race.memfd < 0 || ftruncate(race.memfd, len))
		return -errno;
	race.base = (word)map_at(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED,
				 race.memfd);
	race.scratch = (word)map_at(NULL, PAGE, PROT_NONE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1);
	if (!race.base || !race.scratch)
		return -errno;
	for (int i = 0; i < RACE_FRAMES; i++)
		f[i] = race.base + (i / RACE_PER_PAGE) * PAGE +
		       0x100 + (i % RACE_PER_PAGE) * 0x300;
	for (int i = 0; i < RACE_FRAMES; i++) {
		put_frame(f[i], i + 1 < RACE_FRAMES ? f[i + 1] : 0, RA(i + 1));
		e->ips[i] = RA(i + 1);
	}
	e->n = RACE_FRAMES;
	e->prefix = true;
	a->sp = race.base;
	a->fp = f[0];
	return 0;
}

static void *race_helper(void *arg)
{
	(void)arg;
	while (!ctl->go)
		;
	while (!ctl->stop) {
		for (int i = 0; i < RACE_PAGES && !ctl->stop; i++) {
			void *pg = (void *)(race.base + i * PAGE);
			void *tmp = (void *)race.scratch;

			if (munmap(pg, PAGE) ||
			    mmap(pg, PAGE, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_FIXED, race.memfd,
				 i * PAGE) != pg ||
			    mprotect(pg, PAGE, PROT_NONE) ||
			    mprotect(pg, PAGE, PROT_READ | PROT_WRITE) ||
			    mremap(pg, PAGE, PAGE, MREMAP_MAYMOVE | MREMAP_FIXED,
				   tmp) != tmp ||
			    mremap(tmp, PAGE, PAGE, MREMAP_MAYMOVE | MREMAP_FIXED,
				   pg) != pg ||
			    mmap(pg, PAGE, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_FIXED, race.memfd,
				 i * PAGE) != pg) {
				ctl->err = errno ? errno : EIO;
				ctl->stop = 1;
				return NULL;
			}
		}
		ctl->rounds++;
	}
	return NULL;
}

static void run_loop(struct hl_args *a, struct ctl *c)
{
	(void)c;
	hl_loop(a);
}

/*
 * The uprobe case.  up_outer() -> up_caller() -> up_target(), with a
 * uprobe on up_target's first instruction (push %rbp).  The probe traps
 * (int3), and the perf sample and its deferred request are made by the
 * uprobe handler (handle_swbp() -> handler_chain(), run from
 * exit_to_user_mode_loop() on the way out of the trap).  That handler then
 * emulates the push (push_emulate_op(): sp -= 1 word, the old fp stored,
 * ip += 1), and only after it does the loop run the task_work that walks
 * the stack.  So the walk starts at up_target + 1, after the push, with
 * the caller's frame pointer, and is_uprobe_at_func_entry(), which is only
 * true while handler_chain() runs (utask->auprobe), is false: the
 * function-entry frame rule (unwind_user_at_function_start()) does not
 * apply, and the frame-pointer rule skips up_caller, whose return address
 * is at the stack pointer.  Both kernels: [up_target + 1, up_ret_outer],
 * ended by the zero frame pointer up_outer set.  (An unwind at the probe
 * itself would give [up_target, up_ret_caller, up_ret_outer].)
 */
static char exe_path[512];
static int uprobe_type = -1;
static uint64_t uprobe_offset;

static int file_offset(const char *path, uint64_t vaddr, uint64_t *off)
{
	ElfW(Ehdr) eh;
	ElfW(Phdr) ph;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return -errno;
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh))
		goto bad;
	for (int i = 0; i < eh.e_phnum; i++) {
		if (pread(fd, &ph, sizeof(ph), eh.e_phoff + i * eh.e_phentsize) != sizeof(ph))
			goto bad;
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) &&
		    vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz) {
			*off = vaddr - ph.p_vaddr + ph.p_offset;
			close(fd);
			return 0;
		}
	}
bad:
	close(fd);
	return -ENOEXEC;
}

static int setup_uprobe(const struct hcase *c, struct hl_args *a,
			struct expect *e, char *why, size_t whylen)
{
	FILE *f = fopen("/sys/bus/event_source/devices/uprobe/type", "r");
	ssize_t n;

	if (!f) {
		snprintf(why, whylen, "no uprobe PMU (/sys/bus/event_source/devices/uprobe: CONFIG_UPROBE_EVENTS not set)");
		return KSFT_SKIP;
	}
	if (fscanf(f, "%d", &uprobe_type) != 1)
		uprobe_type = -1;
	fclose(f);
	n = readlink("/proc/self/exe", exe_path, sizeof(exe_path) - 1);
	if (uprobe_type < 0 || n <= 0)
		return -EINVAL;
	exe_path[n] = 0;
	if (file_offset(exe_path, (uintptr_t)up_target, &uprobe_offset))
		return -ENOEXEC;
	e->ret = (uintptr_t)up_target + 1;
	e->in = e->out = 0;
	expect_ras(e, (word[]){ (word)up_ret_outer }, 1);
	e->every_record = true;
	return 0;
}

static void run_uprobe(struct hl_args *a, struct ctl *c)
{
	(void)a;
	(void)c;
	for (int i = 0; i < UPROBE_CALLS; i++) {
		up_outer();
		for (volatile int j = 0; j < 2000; j++)
			;
	}
}

#ifndef __x86_64__
/*
 * The LDT case (compat only).  The task gets an LDT code segment with base
 * LDT_CS_BASE and a stack segment with base LDT_SS_BASE (modify_ldt), and
 * runs the loop in them (hl_ldt_loop): its registers are offsets in those
 * segments.  Two pages are mapped: DECOY at linear address LDT_FP_OFF's
 * page, TRUE at the same page + LDT_SS_BASE.
 *
 * The Rust walk adds the bases (shim.c's unwind_user_get_regs(),
 * unwind_user_seg_base(); walk.rs: ip and return addresses + cs base, sp and
 * frame pointers + ss base, in 32 bits): it reads the chain in TRUE, whose
 * saved frame pointer is an offset, and reports linear addresses:
 * [hl_ldt_ret, RA(1) + cs base, RA(2) + cs base].  A user-mode sample's
 * entry is its own IP (perf reports the linear IP too, code_segment_base()).
 *
 * Upstream ignores the bases (user.c reads instruction_pointer(),
 * frame_pointer() and the words at the offsets as linear addresses): it
 * reads DECOY and reports offsets: [hl_ldt_ret - cs base, RA(101)].  Its
 * first entry for a user-mode sample is the sample's IP - cs base.
 */
#define LDT_CS_BASE	0x01000000UL
#define LDT_SS_BASE	0x01000000UL
#define LDT_PAGE	0x20000000UL
#define LDT_SEL(i)	(((i) << 3) | 4 | 3)	/* LDT, RPL 3 */
#define ATOMIC_UNWIND	1	/* hcase.arg: ldt_atomic */
#define UDT_DIR		"/sys/kernel/debug/unwind_deferred_test"

static int ldt_probe(void)
{
	char buf[16];

	if (syscall(SYS_modify_ldt, 0, buf, sizeof(buf)) < 0 && errno == ENOSYS)
		return -ENOSYS;
	return 0;
}

static int setup_ldt(const struct hcase *c, struct hl_args *a,
		     struct expect *e, char *why, size_t whylen)
{
	struct user_desc d = {
		.limit = 0xfffff,
		.seg_32bit = 1,
		.limit_in_pages = 1,
		.useable = 1,
	};
	word decoy, truth, sp, f1, f2;

	if (ldt_probe()) {
		snprintf(why, whylen, "modify_ldt: ENOSYS (CONFIG_MODIFY_LDT_SYSCALL not set)");
		return KSFT_SKIP;
	}
	/*
	 * ldt_atomic needs the test driver (CONFIG_UNWIND_DEFERRED_TEST),
	 * which the test kernels have (a SKIP fails there) and the
	 * distribution-sized one does not.
	 */
	if (c->arg == ATOMIC_UNWIND && access(UDT_DIR "/ctl", W_OK)) {
		snprintf(why, whylen, "%s/ctl: %s (no CONFIG_UNWIND_DEFERRED_TEST)",
			 UDT_DIR, strerror(errno));
		return KSFT_SKIP;
	}
	decoy = (word)map_at((void *)LDT_PAGE, PAGE, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1);
	truth = (word)map_at((void *)(LDT_PAGE + LDT_SS_BASE), PAGE,
			     PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1);
	if (decoy != LDT_PAGE || truth != LDT_PAGE + LDT_SS_BASE)
		return -EEXIST;
	/* Offsets in the stack segment. */
	sp = LDT_PAGE + 0x100;
	f1 = LDT_PAGE + 0x200;
	f2 = LDT_PAGE + 0x400;
	put_frame(f1 + LDT_SS_BASE, f2, RA(1));
	put_frame(f2 + LDT_SS_BASE, 0, RA(2));
	put_frame(f1, 0, RA(101));

	d.entry_number = 0;
	d.base_addr = LDT_CS_BASE;
	d.contents = MODIFY_LDT_CONTENTS_CODE;
	if (syscall(SYS_modify_ldt, 0x11, &d, sizeof(d)))
		return -errno;
	d.entry_number = 1;
	d.base_addr = LDT_SS_BASE;
	d.contents = MODIFY_LDT_CONTENTS_DATA;
	if (syscall(SYS_modify_ldt, 0x11, &d, sizeof(d)))
		return -errno;

	a->fp = f1;
	a->ldt_sp = sp;
	a->ldt_ss = LDT_SEL(1);
	a->ldt_ip = (word)hl_ldt_in - LDT_CS_BASE;
	a->ldt_cs = LDT_SEL(0);
	a->back_ip = (word)hl_ldt_back;
	if (rust_kernel) {
		e->ret = (uintptr_t)hl_ldt_ret;
		e->in = (uintptr_t)hl_ldt_in;
		e->out = (uintptr_t)hl_ldt_out;
		e->ip_delta = 0;
		expect_ras(e, (word[]){ RA(1) + LDT_CS_BASE, RA(2) + LDT_CS_BASE }, 2);
	} else {
		e->ret = (uintptr_t)hl_ldt_ret - LDT_CS_BASE;
		e->in = (uintptr_t)hl_ldt_in - LDT_CS_BASE;
		e->out = (uintptr_t)hl_ldt_out - LDT_CS_BASE;
		e->ip_delta = LDT_CS_BASE;
		expect_ras(e, (word[]){ RA(101) }, 1);
	}
	return 0;
}

static void run_ldt(struct hl_args *a, struct ctl *c)
{
	(void)c;
	hl_ldt_loop(a);
}

/*
 * ldt_atomic: the same loop, and while it runs the test driver's NMIs and
 * timer interrupts call unwind_user() on the child (arm SRC bit 2), in
 * atomic context with page faults disabled (kernel/unwind/
 * test_deferred.c).  Resolving an LDT segment's base there must not sleep
 * or take a lock: the test kernels have lockdep and DEBUG_ATOMIC_SLEEP,
 * whose reports fail the run (guestlog.py).  Each call made while the
 * child was in the LDT code segment must be exactly what a deferred record
 * of the same place is (the case's expect, first entry its own IP).
 */
#define UDT_PERIOD_US	250
#define ATOMIC_MIN	10	/* calls from NMI, and from hardirq alone */

static int udt_ctl = -1;

static int atomic_arm(pid_t pid)
{
	int err;

	if (udt_ctl < 0)
		udt_ctl = open(UDT_DIR "/ctl", O_WRONLY);
	if (udt_ctl < 0)
		return -errno;
	err = dc_udt_cmd(udt_ctl, "reset");
	if (!err)
		err = dc_udt_cmd(udt_ctl, "arm %d 0 7 %d", pid, UDT_PERIOD_US);
	return err;
}

/* The driver's records of the child: problems found (printed, counted). */
static size_t atomic_check(const struct expect *e, pid_t pid, char *why,
			   size_t whylen)
{
	size_t nmi = 0, irq = 0, other = 0, bad = 0, all = 0;
	char line[1024];
	FILE *f;

	dc_udt_cmd(udt_ctl, "disarm");
	f = fopen(UDT_DIR "/unwinds", "r");
	if (!f) {
		snprintf(why, whylen, "%s/unwinds: %s", UDT_DIR, strerror(errno));
		return 1;
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned long long ip, ips[DC_MAX_IPS + 1];
		unsigned int tid, cpu, in_nmi, in_irq, cs, nr;
		int ret, pos = 0, k;
		char ctx;
		bool ok;

		if (sscanf(line, "U %u %u %c %u %u %d %x %llx %u%n", &tid, &cpu,
			   &ctx, &in_nmi, &in_irq, &ret, &cs, &ip, &nr, &pos) < 9) {
			if (bad++ < 5)
				ksft_print_msg("  malformed: %s", line);
			continue;
		}
		if (tid != (unsigned int)pid)
			continue;
		all++;
		for (k = 0; k < (int)nr && k <= DC_MAX_IPS; k++) {
			int used = 0;

			if (sscanf(line + pos, " %llx%n", &ips[k], &used) < 1)
				break;
			pos += used;
		}
		if (ret || k != (int)(nr < DC_MAX_IPS + 1 ? nr : DC_MAX_IPS + 1) ||
		    (ctx == 'N') != !!in_nmi || !in_irq) {
			if (bad++ < 5)
				ksft_print_msg("  wrong record: %s", line);
			continue;
		}
		for (uint32_t j = 0; j < nr; j++)
			if (ips[j] >= USER_LIMIT && bad++ < 5)
				ksft_print_msg("  not a user address: %s", line);
		if (cs != LDT_SEL(0)) {
			other++;
			continue;
		}
		/* In the LDT code segment: ip is an offset in it. */
		ok = nr == e->n + 1 && ips[0] == ip + LDT_CS_BASE - e->ip_delta;
		for (uint32_t j = 1; ok && j < nr; j++)
			ok = ips[j] == e->ips[j - 1];
		if (!ok) {
			if (bad++ < 5)
				ksft_print_msg("  wrong walk (expected [%#llx + %#lx - %#llx, %#llx ...]): %s",
					       ip, LDT_CS_BASE,
					       (unsigned long long)e->ip_delta,
					       (unsigned long long)e->ips[0], line);
			continue;
		}
		if (in_nmi)
			nmi++;
		else
			irq++;
	}
	fclose(f);
	ksft_print_msg("ldt_atomic: %zu unwind_user() calls on the child, %zu in the LDT code segment from NMI, %zu from hardirq, %zu elsewhere (flat segments), %zu problems\n",
		       all, nmi, irq, other, bad);
	if (nmi < ATOMIC_MIN || irq < ATOMIC_MIN) {
		snprintf(why, whylen, "%zu calls from NMI and %zu from hardirq in the LDT segment, %d of each needed",
			 nmi, irq, ATOMIC_MIN);
		bad++;
	}
	return bad;
}
#endif

static const struct hcase cases[] = {
	{ "fp_zero", "fp 0: exactly [ret]", setup_fp_zero, run_loop },
	{ "self_loop", "fp pointing at itself: exactly [ret, ra1]",
	  setup_self_loop, run_loop },
	{ "cycle", "2-frame cycle: exactly [ret, ra1, ra2]", setup_cycle, run_loop },
	{ "downward", "link to a frame below: exactly [ret, ra1, ra2]",
	  setup_downward, run_loop },
	{ "unaligned", "link to fp + 1: exactly [ret, ra1]", setup_unaligned, run_loop },
#ifdef __x86_64__
	{ "kernel_rbp", "%rbp = 0xffffffff81000000: exactly [ret]",
	  setup_bad_fp, run_loop, BAD_KERNEL },
	{ "kernel_fp", "link to 0xffffffff81000000: exactly [ret, ra1]",
	  setup_bad_link, run_loop, BAD_KERNEL },
	{ "noncanonical_fp", "link to 0x8000000000000000: exactly [ret, ra1]",
	  setup_bad_link, run_loop, BAD_NONCANON },
#else
	{ "kernel_ebp", "%ebp = 0xffffe000 (above the compat TASK_SIZE): exactly [ret]",
	  setup_bad_fp, run_loop, BAD_KERNEL },
	{ "kernel_fp", "link to 0xffffe000 (above the compat TASK_SIZE): exactly [ret, ra1]",
	  setup_bad_link, run_loop, BAD_KERNEL },
	{ "past_4g_fp", "link to 0xfffffffc (the frame would end past 4 GiB): exactly [ret, ra1]",
	  setup_bad_link, run_loop, BAD_NONCANON },
#endif
	{ "unmapped_fp", "link into an unmapped page: exactly [ret, ra1]",
	  setup_unmapped, run_loop },
	{ "guard_low", "sp = fp = a mapping's lowest address, guard page below: exactly [ret, ra1]",
	  setup_guard_low, run_loop },
	{ "straddle_low", "frame's saved fp in the guard page below a mapping: exactly [ret]",
	  setup_straddle_low, run_loop },
	{ "straddle_high", "frame's return address in the unmapped page above: exactly [ret]",
	  setup_straddle_high, run_loop },
#ifdef __x86_64__
	{ "ra_kernel", "return address 0xffffffff81000000 mid-chain: exactly [ret, ra1] (Rust), [ret, ra1, 0xffffffff81000000, ra3] (upstream)",
	  setup_ra, run_loop, BAD_KERNEL },
	{ "ra_limit", "return address TASK_SIZE_MAX after TASK_SIZE_MAX - 1: exactly [ret, 0x7fffffffefff] (Rust), [ret, 0x7fffffffefff, 0x7ffffffff000, ra3] (upstream)",
	  setup_ra, run_loop, RA_FIRST_NONUSER },
#else
	{ "ra_kernel", "return address 0xffffe000 mid-chain (a compat user address): exactly [ret, ra1, 0xffffe000, ra3]",
	  setup_ra, run_loop, BAD_KERNEL },
	{ "ra_limit", "return addresses 0xffffefff, 0xffffffff (below 4 GiB: user addresses for compat): exactly [ret, 0xffffefff, 0xffffffff, ra3]",
	  setup_ra, run_loop, RA_FIRST_NONUSER },
#endif
	{ "long_chain", "3000 valid frames: exactly [ret, ra1 .. ra509], 510 entries",
	  setup_long, run_loop },
	{ "race", "chain pages unmapped/remapped/mprotected/mremapped by another thread: every record a prefix of [ret, ra1 .. ra32]",
	  setup_race, run_loop },
	{ "uprobe_entry", "uprobe at a function's first instruction: exactly [up_target + 1, up_ret_outer]",
	  setup_uprobe, run_uprobe },
#ifndef __x86_64__
	{ "ldt_segments", "loop in LDT code and stack segments with non-zero bases: exactly [ret, ra1 + base, ra2 + base] (Rust), [ret - base, decoy ra] (upstream)",
	  setup_ldt, run_ldt },
	{ "ldt_atomic", "the same, and unwind_user() from NMI and hardirq on it: the same walks, no sleep, no lock",
	  setup_ldt, run_ldt, ATOMIC_UNWIND },
#endif
};

/* ---- running a case ---- */

static long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static bool is_loop_record(const struct expect *e, const struct dc_deferred *d)
{
	return d->nr && (d->ips[0] == e->ret ||
			 (d->ips[0] >= e->in && d->ips[0] < e->out));
}

/*
 * Loop records so far; for the race, 0 until one of them ended early
 * (the other thread's changes met a walk).
 */
static size_t loop_records(const struct expect *e, const struct dc_log *log)
{
	size_t n = 0, early = 0;

	for (size_t i = 0; i < log->nr_deferred; i++) {
		const struct dc_deferred *d = &log->deferred[i];

		if (is_loop_record(e, d)) {
			n++;
			early += d->nr < e->n + 1;
		}
	}
	return e->prefix && !early ? 0 : n;
}

/* Samples of @tid whose cookie has no record. */
static size_t waiting(const struct dc_log *log, uint32_t tid)
{
	size_t n = 0;

	for (size_t i = 0; i < log->nr_samples; i++) {
		const struct dc_sample *s = &log->samples[i];
		bool found = false;

		if (s->tid != tid || !s->cookie)
			continue;
		for (size_t j = 0; j < log->nr_deferred && !found; j++)
			found = log->deferred[j].cookie == s->cookie &&
				log->deferred[j].tid == tid;
		n += !found;
	}
	return n;
}

static void child(const struct hcase *c, struct hl_args *a)
{
	bool race = c->setup == setup_race;
	pthread_t t;

	/* The race's second thread is started before the event is. */
	if (race && pthread_create(&t, NULL, race_helper, NULL)) {
		ctl->err = EAGAIN;
		_exit(1);
	}
	ctl->ready = 1;
	/*
	 * Spin, no system call: the first kernel entries under the event
	 * are the case's own.
	 */
	while (!ctl->go)
		;
	c->run(a, ctl);
	if (race)
		pthread_join(t, NULL);
	asm volatile("" ::: "memory");
	/* Continued by the parent until no sample waits for its record. */
	for (;;)
		raise(SIGSTOP);
}

/*
 * Fork the case's child, sample it until it has made enough loop records
 * (or MAX_RUN_MS), let it stop, and collect everything.  The child stops
 * itself with SIGSTOP; a sample taken in that last kernel entry after
 * get_signal() ran the task_work has its record only at the next return
 * to user space, so then the child is continued (it stops again at once)
 * until no sample of it waits for a record.  Only then is the event
 * disabled: nothing is excused.  Returns the child's pid, or -errno.
 */
static pid_t run_case(const struct hcase *c, struct hl_args *a,
		      const struct expect *e, struct perf_event_attr *attr,
		      struct dc_log *log, int *stops)
{
	struct dc_ring ring = { .fd = -1 };
	long start, end = 0;
	int err = 0, st;
	pid_t pid;

	a->stop = (word)&ctl->stop;
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		child(c, a);

	start = now_ms();
	while (!ctl->ready && !ctl->err && now_ms() - start < CASE_TIMEOUT_MS)
		usleep(1000);
	if (!ctl->ready) {
		err = ctl->err ? -ctl->err : -ETIMEDOUT;
		goto out;
	}
	err = dc_ring_open(&ring, attr, pid, -1, RING_PAGES, 0);
	if (err)
		goto out;
	if (ioctl(ring.fd, PERF_EVENT_IOC_ENABLE, 0)) {
		err = -errno;
		goto out;
	}
#ifndef __x86_64__
	if (c->arg == ATOMIC_UNWIND) {
		err = atomic_arm(pid);
		if (err)
			goto out;
	}
#endif
	ctl->go = 1;
	start = now_ms();
	*stops = 0;
	for (;;) {
		long t = now_ms() - start;
		pid_t w;

		dc_rings_poll_drain(&ring, 1, log, 20);
		if (!ctl->stop &&
		    ((t >= MIN_RUN_MS && loop_records(e, log) >= WANT_LOOP_RECORDS) ||
		     t >= MAX_RUN_MS))
			ctl->stop = 1;
		if (t >= CASE_TIMEOUT_MS) {
			err = -ETIMEDOUT;
			break;
		}
		w = waitpid(pid, &st, WUNTRACED | WNOHANG);
		if (w == pid && WIFSTOPPED(st)) {
			(*stops)++;
			/* Let it finish scheduling out, then look. */
			usleep(20000);
			dc_ring_drain(&ring, log);
			if (waiting(log, pid) && *stops < STOP_RETRIES) {
				kill(pid, SIGCONT);
				continue;
			}
			break;
		}
		if (w == pid) {
			err = -ECHILD;
			break;
		}
	}
	end = now_ms();
	ioctl(ring.fd, PERF_EVENT_IOC_DISABLE, 0);
	dc_ring_drain(&ring, log);
out:
	if (ring.fd >= 0)
		dc_rings_close(&ring, 1);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	if (!err && ctl->err)
		err = -ctl->err;
	if (end)
		ksft_print_msg("%s: ran %ld ms, %lu system calls in the loop, %d stops\n",
			       c->name, end - start, (unsigned long)a->calls, *stops);
	return err ? err : pid;
}

static void print_record(const char *why, const struct dc_deferred *d,
			 const struct expect *e)
{
	ksft_print_msg("  %s: record cookie %#llx tid %u, %u entries:",
		       why, (unsigned long long)d->cookie, d->tid, d->nr);
	for (uint32_t i = 0; i < d->nr && i < 12; i++)
		printf(" %#llx", (unsigned long long)d->ips[i]);
	printf("%s\n", d->nr > 12 ? " ..." : "");
	ksft_print_msg("  expected %u entries: %#llx (or in [%#llx, %#llx))",
		       e->n + 1, (unsigned long long)e->ret,
		       (unsigned long long)e->in, (unsigned long long)e->out);
	for (uint32_t i = 0; i < e->n && i < 11; i++)
		printf(" %#llx", (unsigned long long)e->ips[i]);
	printf("%s%s\n", e->n > 11 ? " ..." : "", e->prefix ? " (or a prefix)" : "");
}

/* Does loop record @d hold exactly what @e says (a prefix for the race)? */
static bool record_ok(const struct expect *e, const struct dc_deferred *d)
{
	if (d->nr == 0 || d->nr - 1 > e->n || (!e->prefix && d->nr - 1 != e->n))
		return false;
	for (uint32_t i = 1; i < d->nr; i++)
		if (d->ips[i] != e->ips[i - 1])
			return false;
	return true;
}

static void test_case(const struct hcase *c)
{
	struct hl_args *a = &ctl->args;
	static struct expect e;
	struct perf_event_attr attr;
	struct dc_log log = { 0 };
	size_t bad = 0, in_loop = 0, in_user = 0, full = 0;
	char why[160] = "";
	int ret, stops = 0;
	pid_t pid;

	memset((void *)ctl, 0, sizeof(*ctl));
	memset(&e, 0, sizeof(e));
	e.ret = (uintptr_t)hl_ret;
	e.in = (uintptr_t)hl_in;
	e.out = (uintptr_t)hl_out;
	a->nr = SYS_read;
	a->a0 = zero_fd;
	a->a1 = (word)read_buf;
	a->a2 = READ_SIZE;
	a->spin = SPIN;
	ret = c->setup(c, a, &e, why, sizeof(why));
	if (ret == KSFT_SKIP) {
		ksft_test_result_skip("%s: %s\n", c->name, why);
		unmap_all();
		return;
	}
	if (ret < 0) {
		ksft_test_result_fail("%s: setting up: %s\n", c->name, strerror(-ret));
		unmap_all();
		return;
	}

	if (c->setup == setup_uprobe) {
		memset(&attr, 0, sizeof(attr));
		attr.size = sizeof(attr);
		attr.type = uprobe_type;
		attr.config = 0;
		attr.uprobe_path = (uintptr_t)exe_path;
		attr.probe_offset = uprobe_offset;
		attr.sample_period = 1;
		attr.sample_type = DC_SAMPLE_TYPE;
		attr.sample_id_all = 1;
		attr.disabled = 1;
		attr.defer_callchain = 1;
		attr.defer_output = 1;
		attr.wakeup_events = 1;
	} else {
		dc_attr_init(&attr, PERIOD_NS, true);
	}

	pid = run_case(c, a, &e, &attr, &log, &stops);
	unmap_all();
	if (c->setup == setup_race)
		close(race.memfd);
	if (pid < 0) {
		ksft_test_result_fail("%s: running the case: %s\n", c->name, strerror(-pid));
		dc_log_free(&log);
		return;
	}

	if (log.lost || log.malformed) {
		ksft_print_msg("  %llu records lost, %llu malformed\n",
			       (unsigned long long)log.lost,
			       (unsigned long long)log.malformed);
		bad++;
	}
	for (size_t i = 0; i < log.nr_samples; i++) {
		struct dc_sample *s = &log.samples[i];
		struct dc_deferred *d;
		long idx, n;

		if (s->pid != (uint32_t)pid || s->tid != (uint32_t)pid ||
		    !s->ends_deferred || !s->cookie) {
			if (bad++ < 5)
				ksft_print_msg("  sample %zu (pid %u tid %u ip %#llx): no cookie\n",
					       i, s->pid, s->tid, (unsigned long long)s->ip);
			continue;
		}
		idx = dc_find_deferred(&log, s->pid, s->tid, s->cookie, &n);
		if (n != 1) {
			if (bad++ < 5)
				ksft_print_msg("  sample %zu (ip %#llx): cookie %#llx has %ld records\n",
					       i, (unsigned long long)s->ip,
					       (unsigned long long)s->cookie, n);
			continue;
		}
		d = &log.deferred[idx];
		d->matched++;
		/* Taken in user mode inside the loop: the record starts at the sample's IP. */
		if (s->ip < KERNEL_MIN && is_loop_record(&e, d) && d->ips[0] != e.ret) {
			in_user++;
			if (d->ips[0] != s->ip - e.ip_delta && bad++ < 5) {
				ksft_print_msg("  user-mode sample at %#llx:\n",
					       (unsigned long long)s->ip);
				print_record("first entry is not the sample's IP", d, &e);
			}
		}
	}
	for (size_t i = 0; i < log.nr_deferred; i++) {
		struct dc_deferred *d = &log.deferred[i];
		bool loop = is_loop_record(&e, d), exact = false;

		if (d->pid != (uint32_t)pid || d->tid != (uint32_t)pid ||
		    d->misc != PERF_RECORD_MISC_USER || !d->matched || !d->nr) {
			if (bad++ < 5)
				ksft_print_msg("  record %zu: pid %u tid %u misc %#x, %d samples, %u entries\n",
					       i, d->pid, d->tid, d->misc, d->matched, d->nr);
			continue;
		}
		if (loop) {
			in_loop++;
			exact = record_ok(&e, d);
			full += d->nr == e.n + 1;
			if (!exact && bad++ < 5)
				print_record("wrong loop record", d, &e);
		} else if (e.every_record && bad++ < 5) {
			print_record("record not of the probed call", d, &e);
		}
		if (exact && e.nonuser_ok)
			continue;	/* upstream's documented non-user entry */
		for (uint32_t j = 0; j < d->nr; j++) {
			if (d->ips[j] >= USER_LIMIT) {
				if (bad++ < 5)
					print_record("not a user address", d, &e);
				break;
			}
		}
	}
	ksft_print_msg("%s: %zu samples, %zu records, %zu of the loop (%zu sampled in user mode, %zu of full length %u), %zu problems\n",
		       c->name, log.nr_samples, log.nr_deferred, in_loop, in_user,
		       full, e.n + 1, bad);
	if (e.prefix) {
		ksft_print_msg("race: %lu rounds over %d pages by the other thread, %zu records ended early\n",
			       (unsigned long)ctl->rounds, RACE_PAGES, in_loop - full);
		if (full == in_loop) {
			ksft_print_msg("  no record ended early: no walk met the other thread's changes\n");
			bad++;
		}
	}
#ifndef __x86_64__
	if (c->arg == ATOMIC_UNWIND && atomic_check(&e, pid, why, sizeof(why))) {
		if (why[0])
			ksft_print_msg("  %s\n", why);
		bad++;
	}
#endif
	if (e.every_record && (in_loop != UPROBE_CALLS || log.nr_samples != UPROBE_CALLS)) {
		ksft_print_msg("  %d calls of the probed function: %zu samples and %zu records of them\n",
			       UPROBE_CALLS, log.nr_samples, in_loop);
		bad++;
	}
	if (in_loop < MIN_LOOP_RECORDS) {
		ksft_print_msg("  only %zu records of the loop (%d needed)\n",
			       in_loop, MIN_LOOP_RECORDS);
		bad++;
	}
	ksft_test_result(!bad, "%s: %s (%zu records checked)\n", c->name, c->what, in_loop);
	dc_log_free(&log);
}

/* Which kernel: the Rust one has perf_callchain_rust, upstream does not. */
static bool detect_rust(const char **how)
{
	char line[512];
	FILE *f = fopen("/proc/kallsyms", "r");
	bool rust = false, c = false;

	if (f) {
		while (fgets(line, sizeof(line), f)) {
			if (strstr(line, " perf_callchain_rust\n"))
				rust = true;
			if (strstr(line, " perf_unwind_deferred_callback\n"))
				c = true;
		}
		fclose(f);
	}
	if (rust != c) {
		*how = rust ? "kallsyms: perf_callchain_rust" :
			      "kallsyms: perf_unwind_deferred_callback";
		return rust;
	}
	if (!strcmp(dc_variant(), "rust")) {
		*how = "cmdline variant=rust";
		return true;
	}
	*how = "cmdline (not rust)";
	return false;
}

int main(void)
{
	long t0 = now_ms();
	const char *how;

	ksft_print_header();
	ksft_set_plan(ARRAY_SIZE(cases));
	rust_kernel = detect_rust(&how);
	ksft_print_msg("%s kernel (%s), %s build, user addresses below %#llx\n",
		       rust_kernel ? "Rust" : "upstream C", how,
		       W == 8 ? "64-bit" : "compat", (unsigned long long)USER_LIMIT);
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	read_buf = mmap(NULL, READ_SIZE, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	zero_fd = open("/dev/zero", O_RDONLY);
	if (ctl == MAP_FAILED || read_buf == MAP_FAILED || zero_fd < 0)
		ksft_exit_fail_msg("setup: %s\n", strerror(errno));
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		test_case(&cases[i]);
	ksft_print_msg("%zu cases in %ld ms\n", ARRAY_SIZE(cases), now_ms() - t0);
	dc_finished();
}
