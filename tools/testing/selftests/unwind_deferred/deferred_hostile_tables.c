// SPDX-License-Identifier: GPL-2.0
/*
 * Hostile unwind tables end the deferred table walk cleanly: the walk
 * refuses them, counts why, and falls back to the frame-pointer step.
 *
 * Each case writes a small object to a file under /tmp (mkstemp): a valid
 * x86-64 ELF header (ET_DYN), two program headers (PT_LOAD of the whole
 * file at offset 0, R+X; PT_GNU_EH_FRAME), section headers (only for
 * readelf), a code blob and the case's .eh_frame_hdr and .eh_frame.  The
 * blob (ht_blob below, copied from this binary's text: position
 * independent) loops on 1 MiB reads of /dev/zero with raw `syscall` until
 * *stop (%r8), then returns; it never touches %rsp or %rbp.  The child
 * maps the file PROT_READ|PROT_EXEC at offset 0 with nothing mapped after
 * it (the page after the file is unmapped), and calls the blob from
 * ht_caller() <- ht_outer() <- child() <- run_case() <- test_case() <-
 * main(), all with frame pointers (this binary is static, -O1, frame
 * pointers, linked without --eh-frame-hdr: it has no PT_GNU_EH_FRAME, so
 * its own frames are always walked by frame pointer; the lookup that
 * finds no hdr for it is remembered for the process, one no_eh_frame).
 *
 * A per-task 10 kHz cpu-clock event with defer_callchain samples the
 * child.  With /proc/sys/kernel/unwind_user_tables present (the Rust
 * kernel with table unwinding) it is switched on for the run and restored
 * at exit.  A record of a kernel entry (or user-mode sample) in the blob
 * starts at a pc in the blob.  Then:
 *
 * - valid CFI (CFA = rsp + 8, return address at CFA - 8): the table step
 *   gives the return address into ht_caller, and the frame-pointer walk
 *   goes on from %rbp, ht_caller's frame: exactly
 *   [blob, ht_caller, ht_outer, child, run_case, test_case, main,
 *   __libc_start_call_main] (see DC_MAIN_FRAMES for the end);
 *   table_frames grows by at least one per such record, no refused_*.
 * - every hostile table: the table step is refused, and the frame-pointer
 *   step from the blob frame reads the frame record at %rbp, which is
 *   ht_caller's: ht_caller itself is skipped.  Exactly
 *   [blob, ht_outer, child, run_case, test_case, main,
 *   __libc_start_call_main]; the case's refused_* counter grows by at least
 *   one per such record, no other refused_* counter and not table_frames.
 *
 * The cases and their counters (src/logic/cfi.rs):
 *   garbage       hdr version byte != 1: read_hdr() says NoTable, the
 *                 lookup has no hdr: no_eh_frame (2 per process: the
 *                 object and this binary, each remembered as having no
 *                 tables), then no_tables for every frame of either (2
 *                 per blob walk at least), no refused_*
 *   huge_count    version 1, fde_count 2^44, eh_frame_ptr outside: the
 *                 first probe is 2^46 bytes past the table, past the user
 *                 address space: Fault(Table), refused_fault
 *   cie_self      the FDE's CIE pointer is the FDE itself: its "CIE" ends
 *                 past the FDE's start: Malformed(Cie), refused_malformed
 *   cfa_sp0       DW_CFA_def_cfa rsp+0: CfaNotAbove, refused_cfa_not_above
 *   cfa_sp_m8     DW_CFA_def_cfa_sf rsp-8: refused_cfa_not_above
 *   cfa_huge      DW_CFA_def_cfa rsp+0x7ffffff8 (offsets are i32: the
 *                 farthest a CFA can point): the return address read
 *                 2 GiB above the stack faults: refused_fault
 *   remember      100 x DW_CFA_remember_state (depth 16): refused_bound
 *   many_ops      5000 nops/advance_loc(0) (1024 instructions):
 *                 refused_bound
 *   truncated     the hdr and the first of its 4 table entries end exactly
 *                 at the mapping's end, the next page unmapped: the first
 *                 probe (entry 2) faults: refused_fault
 *   valid         table_frames
 *
 * Hostile ELF headers over valid tables (src/logic/elf.rs, locate()
 * refuses each: no_eh_frame as for garbage, 2 per process):
 *   phoff_out     e_phoff at the file's end: the program headers are in
 *                 the unmapped page after the mapping
 *   phnum_big     e_phnum 0xffff (PN_XNUM), over MAX_PHDRS (64)
 *   phentsize     e_phentsize 64, not sizeof(Elf64_Phdr)
 *   ehfr_out      PT_GNU_EH_FRAME in the unmapped page after the mapping
 *   ehfr_code     PT_GNU_EH_FRAME at the code (version byte 0x49)
 * And:
 *   unsorted      hdr table (blob -> F), (0 -> G), (blob + 0x1000 -> G):
 *                 the binary search probes entry 1, then entry 2, and
 *                 ends at G, which does not cover the blob (the walk
 *                 checks the FDE's range, not the table's order):
 *                 refused_no_fde, the fallback chain.  Overlapping FDEs
 *                 are the host test rows::overlapping_fdes_answer_as_the_search.
 *   cfa_odd       CFA rsp+4, return address at CFA-4 (a CIE with data
 *                 alignment -4): a table step refuses a CFA that is not
 *                 word-aligned, as the frame-pointer step and upstream's
 *                 unwind_user_next_common() do: refused_cfa_unaligned,
 *                 the fallback chain
 *   budget        an FDE whose compilation reads about 460 times, then
 *                 faults at the mapping's end (transient: compiled again
 *                 at every frame), and the blob called by ht_fp_enter
 *                 with %rbp at NR_FP_FRAMES crafted frame records, each
 *                 returning to blob + 1: the walk's reads run out after
 *                 about 35 frames (MAX_TABLE_READS, 16,384) and the rest
 *                 go by frame pointer: exactly [blob, (blob + 1) x
 *                 NR_FP_FRAMES, ht_caller, ht_outer, ...];
 *                 budget_exhausted grows by one per walk of the blob at
 *                 least, refused_fault too, refused_bound may (the
 *                 compilation the budget ends), no table_frames
 *   lookups       the valid object mapped NR_OBJS (20) times; the blob
 *                 in the first is entered by ht_ret_enter, which pushes
 *                 the return pads (nop; ret) of the other 19 and a label
 *                 of its own: a true return chain through 20 objects.
 *                 A walk looks up MAX_LOOKUPS (16) new objects at most,
 *                 and the mm's cache keeps them: the first walk of the
 *                 blob is exactly [blob, 16 pads, ht_caller, ...] (the
 *                 17th lookup is refused, lookups_capped, and the
 *                 frame-pointer step from ht_ret_enter's frame record
 *                 skips the rest), every later one [blob, 19 pads,
 *                 ht_ret_enter, ht_caller, ...]; no refusal
 *   churn         hdr and .eh_frame on the second page; a second thread
 *                 of the child unmaps that page, maps it back from the
 *                 file, rewrites the FDE's CFA offset in the file (8 or
 *                 0), in turns every 300 us, under the walks: every
 *                 record is exactly the chain of valid or the fallback
 *                 chain (unmapped: no_eh_frame or refused_fault;
 *                 rewritten to 0: refused_cfa_not_above), no other
 *                 refusal, revalidations grows.  Which one a record is
 *                 depends on the moment, so the share is printed, not
 *                 asserted; the rows of a file rewritten under an
 *                 unchanged mapping are not compiled again (they depend
 *                 on the file's contents, which a mapping is assumed to
 *                 keep: see src/tables.rs).
 *   hotplug       the valid object, the child pinned to CPU 1, which
 *                 goes offline and online again every 40 ms (the child
 *                 pinned again): the chain of valid, table_frames, and
 *                 on every kernel CPU 1 offline HOTPLUG_CYCLES times at
 *                 least and blob records of entries on both CPUs (the
 *                 cookie's low half is the CPU + 1); a SKIP without
 *                 cpu1/online.
 *
 * Checked for every case, on every kernel: each sample of the child has a
 * cookie and each cookie exactly one record of the child, MISC_USER,
 * non-empty, user addresses only; nothing lost; at least MIN_BLOB_RECORDS
 * records start in the blob (the cases with fewer wanted, that many).
 * Without the tables switch (upstream C) only these are asserted, and
 * hotplug's CPUs.
 *
 * --dry-run [DIR]: build each case's file, map it, call the blob a few
 * times through ht_outer() and ht_caller() (stop already set: one read
 * each) and check it returns and read; with DIR
 * the files are kept there as DIR/<case>.elf (for readelf).  Needs no
 * perf_event_open.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest.h"
#include "dc_util.h"

#define PERIOD_NS		100000		/* 10 kHz */
#define RING_PAGES		256
#define READ_SIZE		(1 << 20)
#define WANT_BLOB_RECORDS	30
#define MIN_BLOB_RECORDS	5
#define MIN_RUN_MS		150
#define MAX_RUN_MS		4000
#define CASE_TIMEOUT_MS		30000
#define STOP_RETRIES		20
#define PAGE			4096UL

/* The object's layout (file offset == vaddr). */
#define FILE_SIZE	(2 * PAGE)
#define SHSTR_OFF	0x0b0
#define SHDR_OFF	0x100
#define NR_SHDRS	5
#define BLOB_OFF	0x280
#define HDR_OFF		0x300
#define EH_OFF		0x400
/* The churn case: hdr and .eh_frame on the second page. */
#define CHURN_HDR_OFF	(PAGE + 0x000)
#define CHURN_EH_OFF	(PAGE + 0x100)
/* The budget case: a 64 KiB FDE that runs past the file's end. */
#define BUDGET_SIZE	(15 * PAGE)

/*
 * ht_blob(fd, buf, len, unused, stop): read(fd, buf, len) until *stop.
 * syscall keeps everything but %rax, %rcx and %r11.
 */
asm(".pushsection .text\n"
	".globl ht_blob\n"
	".type ht_blob, @function\n"
	"ht_blob:\n"
	"	mov %rdi, %r9\n"
	"1:	xor %eax, %eax\n"
	"	mov %r9, %rdi\n"
	"	syscall\n"
	"	cmpl $0, (%r8)\n"
	"	je 1b\n"
	"	ret\n"
	/* A return pad: the lookups case returns through each mapping's. */
	".globl ht_blob_pad\n"
	"ht_blob_pad:\n"
	"	nop\n"
	"	ret\n"
	".globl ht_blob_end\n"
	"ht_blob_end:\n"
	".size ht_blob, . - ht_blob\n"
	".popsection\n");

/*
 * ht_fp_enter(fd, buf, len, ra, stop, blob): a frame record of its own,
 * then NR_FP_FRAMES frame records below it on the stack, each [next
 * record, ra], the highest linking to its own; calls the blob with %rbp
 * at the lowest, so that a frame-pointer walk from the blob meets ra
 * NR_FP_FRAMES times, then ht_caller.
 */
#define NR_FP_FRAMES	48
#define STR_(x)		#x
#define STR(x)		STR_(x)
asm(".pushsection .text\n"
	".globl ht_fp_enter\n"
	".type ht_fp_enter, @function\n"
	"ht_fp_enter:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	sub $16 * " STR(NR_FP_FRAMES) ", %rsp\n"
	"	mov %rbp, %r10\n"
	"	lea -16(%rbp), %r11\n"
	"1:	mov %r10, (%r11)\n"
	"	mov %rcx, 8(%r11)\n"
	"	mov %r11, %r10\n"
	"	sub $16, %r11\n"
	"	cmp %rsp, %r11\n"
	"	jae 1b\n"
	"	mov %rsp, %rbp\n"
	"	call *%r9\n"
	"	lea 16 * " STR(NR_FP_FRAMES) "(%rsp), %rbp\n"
	"	leave\n"
	"	ret\n"
	".size ht_fp_enter, . - ht_fp_enter\n"
	".popsection\n");

/*
 * ht_ret_enter(fd, buf, len, ras, stop, blob): a frame record, then the
 * address of its label 2 and ras[NR_OBJS - 2] ... ras[0] pushed, and a
 * jump to the blob: the blob returns to ras[0], a return pad in another
 * mapping, which returns to ras[1], ..., the last to label 2, which
 * returns to ht_caller.  The stack always holds the true return chain.
 */
#define NR_OBJS		20
/* New objects one walk may look up (tables.rs). */
#define MAX_LOOKUPS	16
asm(".pushsection .text\n"
	".globl ht_ret_enter\n"
	".type ht_ret_enter, @function\n"
	"ht_ret_enter:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	lea 2f(%rip), %rax\n"
	"	push %rax\n"
	"	mov $" STR(NR_OBJS) " - 1, %r10\n"
	"1:	push -8(%rcx, %r10, 8)\n"
	"	dec %r10\n"
	"	jnz 1b\n"
	"	jmp *%r9\n"
	"2:	pop %rbp\n"
	"	ret\n"
	".size ht_ret_enter, . - ht_ret_enter\n"
	".popsection\n");

extern const char ht_blob[], ht_blob_pad[], ht_blob_end[];
void ht_fp_enter(long fd, void *buf, long len, uint64_t ra, volatile int *stop,
		 const void *blob);
void ht_ret_enter(long fd, void *buf, long len, const uint64_t *ras,
		  volatile int *stop, const void *blob);
typedef void (*blob_fn)(long fd, void *buf, long len, long unused,
			volatile int *stop);

struct ctl {
	volatile int ready, go, stop;
	volatile int err;
	volatile uint64_t blob;	/* where the child mapped the blob */
	volatile uint64_t ras[NR_OBJS - 1];	/* lookups: the return pads */
	volatile int churns;	/* churn: mapping changes and rewrites done */
};

static struct ctl *ctl;
static int zero_fd;
static char *read_buf;
static char *map_base;		/* the child's (or dry run's) mapping */

enum kind { K_GARBAGE, K_HUGE_COUNT, K_CIE_SELF, K_CFA_SP0, K_CFA_SP_M8,
	    K_CFA_HUGE, K_REMEMBER, K_MANY_OPS, K_TRUNCATED, K_VALID,
	    K_PHOFF_OUT, K_PHNUM_BIG, K_PHENTSIZE, K_EHFR_OUT, K_EHFR_CODE,
	    K_UNSORTED, K_CFA_ODD, K_BUDGET, K_LOOKUPS, K_CHURN, K_HOTPLUG };

struct tcase {
	const char *name;
	enum kind kind;
	const char *counter;	/* the stats counter that must grow */
	const char *also[2];	/* other refused_* counters that may grow */
	int want;		/* blob records wanted (0: WANT_BLOB_RECORDS) */
};

static const struct tcase cases[] = {
	{ "garbage",	K_GARBAGE,	"no_eh_frame" },
	{ "huge_count",	K_HUGE_COUNT,	"refused_fault" },
	{ "cie_self",	K_CIE_SELF,	"refused_malformed" },
	{ "cfa_sp0",	K_CFA_SP0,	"refused_cfa_not_above" },
	{ "cfa_sp_m8",	K_CFA_SP_M8,	"refused_cfa_not_above" },
	{ "cfa_huge",	K_CFA_HUGE,	"refused_fault" },
	{ "remember",	K_REMEMBER,	"refused_bound" },
	{ "many_ops",	K_MANY_OPS,	"refused_bound" },
	{ "truncated",	K_TRUNCATED,	"refused_fault" },
	{ "valid",	K_VALID,	"table_frames" },
	{ "phoff_out",	K_PHOFF_OUT,	"no_eh_frame", {}, 5 },
	{ "phnum_big",	K_PHNUM_BIG,	"no_eh_frame", {}, 5 },
	{ "phentsize",	K_PHENTSIZE,	"no_eh_frame", {}, 5 },
	{ "ehfr_out",	K_EHFR_OUT,	"no_eh_frame", {}, 5 },
	{ "ehfr_code",	K_EHFR_CODE,	"no_eh_frame", {}, 5 },
	{ "unsorted",	K_UNSORTED,	"refused_no_fde", {}, 5 },
	{ "cfa_odd",	K_CFA_ODD,	"refused_cfa_unaligned", {}, 5 },
	/* Each walk of the blob does 16,384 reads: 0.5-1 s under TCG. */
	{ "budget",	K_BUDGET,	"budget_exhausted",
	  { "refused_fault", "refused_bound" }, 2 },
	{ "lookups",	K_LOOKUPS,	"lookups_capped", {}, 5 },
	{ "churn",	K_CHURN,	"revalidations",
	  { "refused_fault", "refused_cfa_not_above" }, 10 },
	{ "hotplug",	K_HOTPLUG,	"table_frames", {}, 10 },
};

/* The cases whose object has no usable .eh_frame_hdr. */
static bool no_hdr(enum kind k)
{
	return k == K_GARBAGE || (k >= K_PHOFF_OUT && k <= K_EHFR_CODE);
}

/* The cases whose table steps succeed. */
static bool steps(enum kind k)
{
	return k == K_VALID || k == K_LOOKUPS || k == K_CHURN ||
	       k == K_HOTPLUG;
}

/* ---------------- building the object ---------------- */

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

static size_t uleb(unsigned char *p, uint64_t v)
{
	size_t n = 0;

	do {
		unsigned char b = v & 0x7f;

		v >>= 7;
		p[n++] = b | (v ? 0x80 : 0);
	} while (v);
	return n;
}

/* Where this case's .eh_frame starts (EH_OFF, or CHURN_EH_OFF). */
static size_t eh_off = EH_OFF;
/* The file offset of the churn case's CFA offset byte (8, or 0 rewritten). */
static size_t churn_byte;

/* The file (and mapping) size of a case. */
static size_t case_size(enum kind kind)
{
	return kind == K_BUDGET ? BUDGET_SIZE : FILE_SIZE;
}

/*
 * The CIE at eh_off: version 1, "zR", code align 1, data align -8 (or
 * -4 for @da4), RA column 16, pointers pcrel|sdata4; DW_CFA_def_cfa
 * rsp+8, DW_CFA_offset r16 at CFA-8.  Returns its size.
 */
static size_t put_cie(unsigned char *f, bool da4)
{
	unsigned char body[] = {
		0, 0, 0, 0,		/* CIE id */
		1, 'z', 'R', 0,		/* version, augmentation */
		1, 0x78, 16,		/* code align, data align -8, RA column */
		1, 0x1b,		/* augmentation data: pcrel|sdata4 */
		0x0c, 7, 8,		/* DW_CFA_def_cfa rsp, 8 */
		0x90, 1,		/* DW_CFA_offset r16, CFA - 8 */
		0, 0,			/* padding (nops) */
	};

	if (da4) {
		body[9] = 0x7c;		/* data align -4 */
		body[17] = 2;		/* r16 at CFA - 2 * 4 */
	}
	put32(f + eh_off, sizeof(body));
	memcpy(f + eh_off + 4, body, sizeof(body));
	return 4 + sizeof(body);
}

/*
 * An FDE at @off for [@begin, @begin + @range) (file offsets), CIE at
 * @cie, with @insns.  Returns its size.
 */
static size_t put_fde_at(unsigned char *f, size_t off, size_t cie, size_t begin,
			 size_t range, const unsigned char *insns, size_t n)
{
	size_t len = 4 + 4 + 4 + 1 + n, pad = (4 - len % 4) % 4;

	put32(f + off, len + pad);
	put32(f + off + 4, off + 4 - cie);			/* CIE pointer */
	put32(f + off + 8, (uint32_t)(begin - (off + 8)));	/* pc_begin, pcrel */
	put32(f + off + 12, range);				/* pc_range */
	f[off + 16] = 0;					/* augmentation data */
	memcpy(f + off + 17, insns, n);
	memset(f + off + 17 + n, 0, pad);
	return 4 + len + pad;
}

/* An FDE at @off for the blob, CIE at @cie, with @insns.  Returns its size. */
static size_t put_fde(unsigned char *f, size_t off, size_t cie,
		      const unsigned char *insns, size_t n, size_t blob_len)
{
	return put_fde_at(f, off, cie, BLOB_OFF, blob_len, insns, n);
}

/*
 * The hdr at @hdr: version 1, eh_frame_ptr pcrel|sdata4, fde_count udata4,
 * table datarel|sdata4, one entry (blob -> fde).  Returns its size.
 */
static size_t put_hdr(unsigned char *f, size_t hdr, size_t fde, uint32_t count)
{
	f[hdr] = 1;
	f[hdr + 1] = 0x1b;
	f[hdr + 2] = 0x03;
	f[hdr + 3] = 0x3b;
	put32(f + hdr + 4, (uint32_t)(eh_off - (hdr + 4)));
	put32(f + hdr + 8, count);
	put32(f + hdr + 12, (uint32_t)(BLOB_OFF - hdr));
	put32(f + hdr + 16, (uint32_t)(fde - hdr));
	return 20;
}

/* Table entry @i of the hdr at @hdr: (@start -> @fde), file offsets. */
static void put_entry(unsigned char *f, size_t hdr, int i, size_t start, size_t fde)
{
	put32(f + hdr + 12 + 8 * i, (uint32_t)(start - hdr));
	put32(f + hdr + 16 + 8 * i, (uint32_t)(fde - hdr));
}

/*
 * The budget case's FDE at @fde for the blob: 0xff00 bytes long (under
 * the interpreter's 64 KiB entry bound), so it runs past the file's end
 * (BUDGET_SIZE), where the page after the mapping is unmapped.  Its
 * instructions up to there are DW_CFA_expression r12 (a register the walk
 * ignores: the expression is skipped, not read) with 128-byte
 * expressions, so that each instruction starts past the interpreter's
 * 128-byte read window: one user read each, about 450 to the end of the
 * mapping (well under the 1,024-instruction bound), where the next read
 * faults.  A fault is transient, never remembered: every frame at a pc
 * of the blob compiles the FDE again, about 460 reads, and a walk over
 * NR_FP_FRAMES such frames needs about 22,000 reads, more than
 * MAX_TABLE_READS (16,384, src/logic/walk.rs).
 */
static void put_budget_fde(unsigned char *f, size_t fde, size_t blob_len)
{
	size_t p = fde + 17;

	put32(f + fde, 0xff00);
	put32(f + fde + 4, fde + 4 - eh_off);
	put32(f + fde + 8, (uint32_t)(BLOB_OFF - (fde + 8)));
	put32(f + fde + 12, blob_len);
	f[fde + 16] = 0;
	for (; p + 132 <= BUDGET_SIZE; p += 132) {
		f[p] = 0x10;		/* DW_CFA_expression r12, 128 bytes */
		f[p + 1] = 12;
		f[p + 2] = 0x80;
		f[p + 3] = 0x01;
	}
}

static void build(unsigned char *f, enum kind kind)
{
	static const char shstr[] = "\0.text\0.eh_frame_hdr\0.eh_frame\0.shstrtab";
	size_t blob_len = ht_blob_end - ht_blob, hdr = HDR_OFF, hdr_len = 20;
	size_t size = case_size(kind), eh_len, fde = 0, n = 0;
	unsigned char ins[5000];
	Elf64_Ehdr *eh = (Elf64_Ehdr *)f;
	Elf64_Phdr *ph = (Elf64_Phdr *)(f + sizeof(*eh));
	Elf64_Shdr *sh = (Elf64_Shdr *)(f + SHDR_OFF);

	memset(f, 0, size);
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = ET_DYN;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_entry = BLOB_OFF;
	eh->e_phoff = sizeof(*eh);
	eh->e_shoff = SHDR_OFF;
	eh->e_ehsize = sizeof(*eh);
	eh->e_phentsize = sizeof(*ph);
	eh->e_phnum = 2;
	eh->e_shentsize = sizeof(*sh);
	eh->e_shnum = NR_SHDRS;
	eh->e_shstrndx = NR_SHDRS - 1;
	memcpy(f + BLOB_OFF, ht_blob, blob_len);

	/* The churn case keeps its tables on the second page, apart from the code. */
	eh_off = kind == K_CHURN ? CHURN_EH_OFF : EH_OFF;
	if (kind == K_CHURN)
		hdr = CHURN_HDR_OFF;
	eh_len = put_cie(f, kind == K_CFA_ODD);
	fde = eh_off + eh_len;
	switch (kind) {
	case K_GARBAGE:
		/* xorshift bytes over hdr and .eh_frame; version byte not 1. */
		for (uint64_t x = 0x9e3779b97f4a7c15ULL, i = HDR_OFF; i < EH_OFF + 256; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			f[i] = x;
		}
		f[HDR_OFF] = 0xa5;
		eh_len = 256;
		break;
	case K_HUGE_COUNT:
		ins[n++] = 0;
		eh_len += put_fde(f, fde, EH_OFF, ins, n, blob_len);
		f[hdr] = 1;
		f[hdr + 1] = 0x1b;
		f[hdr + 2] = 0x04;		/* udata8 */
		f[hdr + 3] = 0x3b;
		put32(f + hdr + 4, 0x7ffffff0);	/* eh_frame 2 GiB away */
		put64(f + hdr + 8, 1ULL << 44);
		put32(f + hdr + 16, (uint32_t)(BLOB_OFF - hdr));
		put32(f + hdr + 20, (uint32_t)(fde - hdr));
		hdr_len = 24;
		break;
	case K_CIE_SELF:
		ins[n++] = 0;
		eh_len += put_fde(f, fde, fde, ins, n, blob_len);
		hdr_len = put_hdr(f, hdr, fde, 1);
		break;
	case K_CFA_SP0:
	case K_CFA_SP_M8:
	case K_CFA_HUGE:
	case K_VALID:
	case K_PHOFF_OUT:
	case K_PHNUM_BIG:
	case K_PHENTSIZE:
	case K_EHFR_OUT:
	case K_EHFR_CODE:
	case K_LOOKUPS:
	case K_CHURN:
	case K_HOTPLUG:
		if (kind == K_CFA_SP0) {
			ins[n++] = 0x0c;	/* DW_CFA_def_cfa rsp, 0 */
			ins[n++] = 7;
			ins[n++] = 0;
		} else if (kind == K_CFA_SP_M8) {
			ins[n++] = 0x12;	/* DW_CFA_def_cfa_sf rsp, 1 * -8 */
			ins[n++] = 7;
			ins[n++] = 1;
		} else if (kind == K_CFA_HUGE) {
			ins[n++] = 0x0c;	/* DW_CFA_def_cfa rsp, 0x7ffffff8 */
			ins[n++] = 7;
			n += uleb(ins + n, 0x7ffffff8);
		} else if (kind == K_CHURN) {
			ins[n++] = 0x0c;	/* DW_CFA_def_cfa rsp, 8 (or 0) */
			ins[n++] = 7;
			ins[n++] = 8;
			churn_byte = fde + 17 + 2;
		} else {
			ins[n++] = 0;		/* the CIE's rules: rsp+8, RA at CFA-8 */
		}
		eh_len += put_fde(f, fde, eh_off, ins, n, blob_len);
		hdr_len = put_hdr(f, hdr, fde, 1);
		break;
	case K_CFA_ODD:
		ins[n++] = 0x0c;		/* DW_CFA_def_cfa rsp, 4 */
		ins[n++] = 7;
		ins[n++] = 4;
		ins[n++] = 0x90;		/* DW_CFA_offset r16, 1 * -4 */
		ins[n++] = 1;
		eh_len += put_fde(f, fde, EH_OFF, ins, n, blob_len);
		hdr_len = put_hdr(f, hdr, fde, 1);
		break;
	case K_UNSORTED: {
		/*
		 * Entries (blob -> F), (0 -> G), (blob + 0x1000 -> G): sorted,
		 * the first two would be the other way round.  The search
		 * probes entry 1 (0 <= pc), then entry 2 (above pc): it ends
		 * at G, an FDE for [0, 0x10), which does not cover the blob.
		 */
		size_t g;

		ins[n++] = 0;
		eh_len += put_fde(f, fde, EH_OFF, ins, n, blob_len);
		g = EH_OFF + eh_len;
		eh_len += put_fde_at(f, g, EH_OFF, 0, 0x10, ins, n);
		hdr_len = put_hdr(f, hdr, fde, 3) + 16;
		put_entry(f, hdr, 1, 0, g);
		put_entry(f, hdr, 2, BLOB_OFF + 0x1000, g);
		break;
	}
	case K_REMEMBER:
		memset(ins, 0x0a, 100);	/* DW_CFA_remember_state */
		n = 100;
		eh_len += put_fde(f, fde, EH_OFF, ins, n, blob_len);
		hdr_len = put_hdr(f, hdr, fde, 1);
		break;
	case K_MANY_OPS:
		for (n = 0; n < 5000; n++)	/* DW_CFA_nop, DW_CFA_advance_loc 0 */
			ins[n] = n & 1 ? 0x40 : 0x00;
		eh_len += put_fde(f, fde, EH_OFF, ins, n, blob_len);
		hdr_len = put_hdr(f, hdr, fde, 1);
		break;
	case K_TRUNCATED:
		/* hdr + entry 0 end at the file's (the mapping's) end; count 4. */
		ins[n++] = 0;
		eh_len += put_fde(f, fde, EH_OFF, ins, n, blob_len);
		hdr = FILE_SIZE - 20;
		hdr_len = put_hdr(f, hdr, fde, 4);
		break;
	case K_BUDGET:
		put_budget_fde(f, fde, blob_len);
		eh_len = size - EH_OFF;
		hdr_len = put_hdr(f, hdr, fde, 1);
		break;
	}

	ph[0].p_type = PT_LOAD;
	ph[0].p_flags = PF_R | PF_X;
	ph[0].p_filesz = ph[0].p_memsz = size;
	ph[0].p_align = PAGE;
	ph[1].p_type = PT_GNU_EH_FRAME;
	ph[1].p_flags = PF_R;
	ph[1].p_offset = ph[1].p_vaddr = ph[1].p_paddr = hdr;
	ph[1].p_filesz = ph[1].p_memsz = hdr_len;
	ph[1].p_align = 4;

	/* Hostile ELF headers, over valid tables (elf::locate refuses each). */
	switch (kind) {
	case K_PHOFF_OUT:	/* the program headers in the unmapped page after the file */
		eh->e_phoff = size;
		break;
	case K_PHNUM_BIG:	/* PN_XNUM: more than elf::MAX_PHDRS (64) */
		eh->e_phnum = 0xffff;
		break;
	case K_PHENTSIZE:	/* not sizeof(Elf64_Phdr) */
		eh->e_phentsize = sizeof(*ph) + 8;
		break;
	case K_EHFR_OUT:	/* PT_GNU_EH_FRAME in the unmapped page after the file */
		ph[1].p_offset = ph[1].p_vaddr = ph[1].p_paddr = size;
		break;
	case K_EHFR_CODE:	/* PT_GNU_EH_FRAME at the code: version byte 0x49 */
		ph[1].p_offset = ph[1].p_vaddr = ph[1].p_paddr = BLOB_OFF;
		break;
	default:
		break;
	}

	memcpy(f + SHSTR_OFF, shstr, sizeof(shstr));
	sh[1] = (Elf64_Shdr){ .sh_name = 1, .sh_type = SHT_PROGBITS,
		.sh_flags = SHF_ALLOC | SHF_EXECINSTR, .sh_addr = BLOB_OFF,
		.sh_offset = BLOB_OFF, .sh_size = blob_len, .sh_addralign = 1 };
	sh[2] = (Elf64_Shdr){ .sh_name = 7, .sh_type = SHT_PROGBITS,
		.sh_flags = SHF_ALLOC, .sh_addr = hdr, .sh_offset = hdr,
		.sh_size = hdr_len, .sh_addralign = 4 };
	sh[3] = (Elf64_Shdr){ .sh_name = 21, .sh_type = SHT_PROGBITS,
		.sh_flags = SHF_ALLOC, .sh_addr = eh_off, .sh_offset = eh_off,
		.sh_size = eh_len, .sh_addralign = 8 };
	sh[4] = (Elf64_Shdr){ .sh_name = 31, .sh_type = SHT_STRTAB,
		.sh_offset = SHSTR_OFF, .sh_size = sizeof(shstr), .sh_addralign = 1 };
}

/* Write the case's object to @path (created with mkstemp if it ends in X). */
static int write_case(const struct tcase *c, char *path)
{
	static unsigned char f[BUDGET_SIZE];
	size_t size = case_size(c->kind);
	int fd, ok;

	_Static_assert(SHDR_OFF + NR_SHDRS * sizeof(Elf64_Shdr) <= BLOB_OFF, "layout");
	build(f, c->kind);
	fd = strchr(path, 'X') ? mkstemp(path) : open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0)
		return -errno;
	ok = write(fd, f, size) == (ssize_t)size;
	close(fd);
	return ok ? 0 : -EIO;
}

/* Map @fd (@size bytes) at offset 0 with the page after it unmapped. */
static char *map_fd(int fd, size_t size)
{
	char *p, *q;

	p = mmap(NULL, size + PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	q = mmap(p, size, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fd, 0);
	if (q != p || munmap(p + size, PAGE)) {
		munmap(p, size + PAGE);
		return NULL;
	}
	return p;
}

static char *map_case(const char *path, size_t size)
{
	int fd = open(path, O_RDONLY);
	char *p;

	if (fd < 0)
		return NULL;
	p = map_fd(fd, size);
	close(fd);
	return p;
}

/* ---------------- the child's frames ---------------- */

static enum kind cur_kind;	/* the case running (set before the fork) */
static uint64_t lookup_ras[NR_OBJS - 1];	/* lookups: the return pads */
static int churn_fd = -1;	/* churn: the file, mapped and rewritten */

__attribute__((noipa)) void ht_caller(void)
{
	const char *blob = map_base + BLOB_OFF;

	DC_KEEP_FRAME();
	if (cur_kind == K_BUDGET)
		ht_fp_enter(zero_fd, read_buf, READ_SIZE, (uintptr_t)blob + 1, &ctl->stop, blob);
	else if (cur_kind == K_LOOKUPS)
		ht_ret_enter(zero_fd, read_buf, READ_SIZE, lookup_ras, &ctl->stop, blob);
	else
		((blob_fn)blob)(zero_fd, read_buf, READ_SIZE, 0, &ctl->stop);
}

__attribute__((noipa)) void ht_outer(void)
{
	DC_KEEP_FRAME();
	ht_caller();
}

/* ---------------- counters ---------------- */

static int64_t stats_delta(const struct dc_stats *a, const struct dc_stats *b,
			   const char *name)
{
	uint64_t va, vb;

	if (!dc_stats_get(a, name, &va) || !dc_stats_get(b, name, &vb))
		return -1;	/* missing: fails every check */
	return (int64_t)(vb - va);
}

/* ---------------- running a case ---------------- */

static long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static uint64_t blob_lo, blob_hi;	/* the blob in the child's mapping */
static size_t cur_want;		/* blob records the case collects */

static bool in_blob(const struct dc_deferred *d)
{
	return d->nr && d->ips[0] >= blob_lo && d->ips[0] < blob_hi;
}

static size_t blob_records(const struct dc_log *log)
{
	size_t n = 0;

	for (size_t i = 0; i < log->nr_deferred; i++)
		n += in_blob(&log->deferred[i]);
	return n;
}

static size_t waiting(const struct dc_log *log, uint32_t tid)
{
	size_t n = 0;

	for (size_t i = 0; i < log->nr_samples; i++) {
		const struct dc_sample *s = &log->samples[i];
		long cnt;

		if (s->tid != tid || !s->cookie)
			continue;
		dc_find_deferred((struct dc_log *)log, s->pid, tid, s->cookie, &cnt);
		n += !cnt;
	}
	return n;
}

/*
 * The churn case's second thread, until *stop, in turns about every
 * 300 us: unmaps the page of the hdr and .eh_frame; maps it back from the
 * file; rewrites the FDE's CFA offset in the file (8, the valid rule, or
 * 0, refused: the two turns alternate).
 */
static void *churn_main(void *unused)
{
	int fd = churn_fd;
	char *p = map_base + PAGE;

	for (int i = 0; !ctl->stop; i++) {
		unsigned char b = i % 6 == 2 ? 0 : 8;
		int err = 0;

		if (i % 3 == 0)
			err = munmap(p, PAGE);
		else if (i % 3 == 1)
			err = mmap(p, PAGE, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED,
				   fd, PAGE) != p;
		else
			err = pwrite(fd, &b, 1, churn_byte) != 1;
		if (err) {
			ctl->err = errno ? errno : EIO;
			break;
		}
		ctl->churns++;
		usleep(300);
	}
	return NULL;
}

/*
 * Map the case's object at map_base; lookups: NR_OBJS - 1 more mappings
 * of the file, whose return pads the blob returns through.
 */
static int map_objects(const char *path)
{
	/*
	 * churn: the page is mapped back through the file of the first
	 * mapping, so that the two VMAs merge into one again: a VMA of
	 * another struct file would never change the code's VMA, and the
	 * object's rows would outlive every remap.
	 */
	if (cur_kind == K_CHURN) {
		churn_fd = open(path, O_RDWR);
		map_base = churn_fd < 0 ? NULL : map_fd(churn_fd, FILE_SIZE);
		return map_base ? 0 : -1;
	}
	map_base = map_case(path, case_size(cur_kind));
	if (!map_base)
		return -1;
	for (int i = 0; cur_kind == K_LOOKUPS && i < NR_OBJS - 1; i++) {
		char *m = map_case(path, FILE_SIZE);

		if (!m)
			return -1;
		lookup_ras[i] = (uintptr_t)m + BLOB_OFF + (ht_blob_pad - ht_blob) + 1;
		ctl->ras[i] = lookup_ras[i];
	}
	return 0;
}

static __attribute__((noipa)) void child(const char *path)
{
	pthread_t th;

	if (map_objects(path)) {
		ctl->err = ENOMEM;
		_exit(1);
	}
	ctl->blob = (uintptr_t)map_base + BLOB_OFF;
	if (cur_kind == K_HOTPLUG) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(1, &set);
		if (sched_setaffinity(0, sizeof(set), &set)) {
			ctl->err = errno;
			_exit(1);
		}
	}
	if (cur_kind == K_CHURN) {
		if (pthread_create(&th, NULL, churn_main, NULL)) {
			ctl->err = EAGAIN;
			_exit(1);
		}
	}
	ctl->ready = 1;
	while (!ctl->go)
		;
	ht_outer();
	asm volatile("" ::: "memory");
	for (;;)
		raise(SIGSTOP);
}

/*
 * The hotplug case: CPU 1 taken offline and back online every HOTPLUG_MS
 * while the child, pinned to it, is sampled.
 */
#define CPU1_ONLINE	"/sys/devices/system/cpu/cpu1/online"
#define HOTPLUG_MS	40
#define HOTPLUG_CYCLES	2
static int offlines;		/* times CPU 1 went offline in the case */

static int set_cpu1(int on)
{
	int fd = open(CPU1_ONLINE, O_WRONLY);
	int ok;

	if (fd < 0)
		return -errno;
	ok = write(fd, on ? "1" : "0", 1) == 1;
	close(fd);
	return ok ? 0 : -errno;
}

/* Every HOTPLUG_MS: CPU 1 off, or on again with @pid pinned to it again. */
static int hotplug_step(pid_t pid, long t, long *last, bool *off)
{
	cpu_set_t set;
	int err;

	if (t - *last < HOTPLUG_MS)
		return 0;
	*last = t;
	err = set_cpu1(*off);
	if (err)
		return err;
	*off = !*off;
	if (*off) {
		offlines++;
		return 0;
	}
	CPU_ZERO(&set);
	CPU_SET(1, &set);
	return sched_setaffinity(pid, sizeof(set), &set) ? -errno : 0;
}

/*
 * As deferred_hostile's run_case(): fork, sample until enough records of
 * the blob (or MAX_RUN_MS), stop the loop, let the child stop itself and
 * continue it until no sample waits for its record.
 */
static __attribute__((noipa)) pid_t run_case(const char *path,
					     struct perf_event_attr *attr,
					     struct dc_log *log)
{
	struct dc_ring ring = { .fd = -1 };
	int err = 0, st, stops = 0;
	long start, t, last_plug = 0;
	bool cpu1_off = false;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		child(path);

	start = now_ms();
	while (!ctl->ready && !ctl->err && now_ms() - start < CASE_TIMEOUT_MS)
		usleep(1000);
	if (!ctl->ready) {
		err = ctl->err ? -ctl->err : -ETIMEDOUT;
		goto out;
	}
	blob_lo = ctl->blob;
	blob_hi = blob_lo + (ht_blob_end - ht_blob);
	err = dc_ring_open(&ring, attr, pid, -1, RING_PAGES, 0);
	if (err)
		goto out;
	if (ioctl(ring.fd, PERF_EVENT_IOC_ENABLE, 0)) {
		err = -errno;
		goto out;
	}
	ctl->go = 1;
	start = now_ms();
	for (;;) {
		pid_t w;

		t = now_ms() - start;
		dc_rings_poll_drain(&ring, 1, log, 20);
		if (cur_kind == K_HOTPLUG && !ctl->stop) {
			err = hotplug_step(pid, t, &last_plug, &cpu1_off);
			if (err)
				break;
		}
		if (!ctl->stop && ((t >= MIN_RUN_MS &&
				    blob_records(log) >= cur_want &&
				    (cur_kind != K_HOTPLUG ||
				     (offlines >= HOTPLUG_CYCLES && !cpu1_off))) ||
				   t >= MAX_RUN_MS))
			ctl->stop = 1;
		if (t >= CASE_TIMEOUT_MS) {
			err = -ETIMEDOUT;
			break;
		}
		w = waitpid(pid, &st, WUNTRACED | WNOHANG);
		if (w == pid && WIFSTOPPED(st)) {
			stops++;
			usleep(20000);
			dc_ring_drain(&ring, log);
			if (waiting(log, pid) && stops < STOP_RETRIES) {
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
	ioctl(ring.fd, PERF_EVENT_IOC_DISABLE, 0);
	dc_ring_drain(&ring, log);
out:
	if (cpu1_off && set_cpu1(1) && !err)
		err = -EIO;
	if (ring.fd >= 0)
		dc_rings_close(&ring, 1);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	if (!err && ctl->err)
		err = -ctl->err;
	return err ? err : pid;
}

static const char *const chain_valid[] = {
	"ht_caller", "ht_outer", "child", "run_case", "test_case", DC_MAIN_FRAMES,
};
static const char *const chain_fp[] = {
	"ht_outer", "child", "run_case", "test_case", DC_MAIN_FRAMES,
};

/*
 * ips[1..] exactly: the addresses @addr (@na of them), then the functions
 * @want (return addresses: looked up at ip - 1).
 */
static bool chain_is(const struct dc_deferred *d, const uint64_t *addr, int na,
		     const char *const *want, int n)
{
	if (d->nr != (uint32_t)(na + n) + 1)
		return false;
	for (int i = 0; i < na; i++)
		if (d->ips[i + 1] != addr[i])
			return false;
	for (int i = 0; i < n; i++)
		if (!dc_sym_is(d->ips[na + i + 1] - 1, want[i]))
			return false;
	return true;
}

/* The lookups case's whole chain: the pads, then ht_ret_enter's label. */
static bool lookups_full(const struct dc_deferred *d, const uint64_t *ras)
{
	int n = ARRAY_SIZE(chain_valid);

	if (d->nr != NR_OBJS + 1 + n || !dc_sym_is(d->ips[NR_OBJS] - 1, "ht_ret_enter"))
		return false;
	for (int i = 0; i < NR_OBJS - 1; i++)
		if (d->ips[i + 1] != ras[i])
			return false;
	for (int i = 0; i < n; i++)
		if (!dc_sym_is(d->ips[NR_OBJS + 1 + i] - 1, chain_valid[i]))
			return false;
	return true;
}

/*
 * Which of the case's expected chains @d is (with tables): 1 the case's
 * own, 2 its other (lookups: capped at MAX_LOOKUPS objects; churn: the
 * frame-pointer fallback), 0 neither.
 */
static int chain_of(enum kind kind, const struct dc_deferred *d, const uint64_t *ras)
{
	uint64_t fp_ras[NR_FP_FRAMES];

	switch (kind) {
	case K_VALID:
	case K_HOTPLUG:
		return chain_is(d, NULL, 0, chain_valid, ARRAY_SIZE(chain_valid));
	case K_CHURN:
		if (chain_is(d, NULL, 0, chain_valid, ARRAY_SIZE(chain_valid)))
			return 1;
		return chain_is(d, NULL, 0, chain_fp, ARRAY_SIZE(chain_fp)) ? 2 : 0;
	case K_BUDGET:
		for (int i = 0; i < NR_FP_FRAMES; i++)
			fp_ras[i] = blob_lo + 1;
		return chain_is(d, fp_ras, NR_FP_FRAMES, chain_valid, ARRAY_SIZE(chain_valid));
	case K_LOOKUPS:
		if (lookups_full(d, ras))
			return 1;
		return chain_is(d, ras, MAX_LOOKUPS, chain_valid, ARRAY_SIZE(chain_valid)) ? 2 : 0;
	default:
		return chain_is(d, NULL, 0, chain_fp, ARRAY_SIZE(chain_fp));
	}
}

static void print_record(const char *why, const struct dc_deferred *d)
{
	ksft_print_msg("  %s: cookie %#llx, %u entries:", why,
		       (unsigned long long)d->cookie, d->nr);
	for (uint32_t i = 0; i < d->nr && i < 12; i++) {
		uint64_t off;
		const char *s = i ? dc_sym(d->ips[i] - 1, &off) : NULL;

		printf(" %#llx%s%s", (unsigned long long)d->ips[i], s ? "/" : "", s ? s : "");
	}
	printf("%s\n", d->nr > 12 ? " ..." : "");
}

static const char *const refused[] = {
	"refused_no_table", "refused_no_fde", "refused_fault", "refused_malformed",
	"refused_encoding", "refused_augmentation", "refused_opcode",
	"refused_ra_column", "refused_ra_rule", "refused_fp_rule",
	"refused_cfa_register", "refused_cfa_expression", "refused_fp_unknown",
	"refused_cfa_not_above", "refused_cfa_unaligned", "refused_bound",
};

static bool may_grow(const struct tcase *c, const char *name)
{
	return !strcmp(name, c->counter) ||
	       (c->also[0] && !strcmp(name, c->also[0])) ||
	       (c->also[1] && !strcmp(name, c->also[1]));
}

/* Counter @name grew by at least @need; else print it and count a problem. */
static size_t grew_by(const struct dc_stats *a, const struct dc_stats *b,
		   const char *name, uint64_t need)
{
	int64_t v = stats_delta(a, b, name);

	if (v >= 0 && (uint64_t)v >= need)
		return 0;
	ksft_print_msg("  %s grew by %lld, want at least %llu\n",
		       name, (long long)v, (unsigned long long)need);
	return 1;
}

/* The case's counters (tables on): how many problems. */
static size_t check_counters(const struct tcase *c, const struct dc_stats *a,
			     const struct dc_stats *b, size_t nblob)
{
	int64_t tf = stats_delta(a, b, "table_frames");
	size_t bad = 0;

	ksft_print_msg("  %s %+lld, table_frames %+lld, no_eh_frame %+lld, refused_fault %+lld, reads %+lld, lookups %+lld, walks %+lld\n",
		       c->counter, (long long)stats_delta(a, b, c->counter), (long long)tf,
		       (long long)stats_delta(a, b, "no_eh_frame"),
		       (long long)stats_delta(a, b, "refused_fault"),
		       (long long)stats_delta(a, b, "reads"),
		       (long long)stats_delta(a, b, "lookups"),
		       (long long)stats_delta(a, b, "walks"));
	switch (c->kind) {
	case K_CHURN:
		/* Walks saw the mappings change (the outcomes are the chains). */
		bad += grew_by(a, b, c->counter, 1);
		break;
	case K_LOOKUPS:
		/* One walk at least met more objects than MAX_LOOKUPS. */
		bad += grew_by(a, b, c->counter, 1);
		bad += grew_by(a, b, "table_frames", MAX_LOOKUPS * nblob);
		break;
	case K_BUDGET:
		/* Every walk of the blob: refusals (faults), then the budget's end. */
		bad += grew_by(a, b, c->counter, nblob);
		bad += grew_by(a, b, "refused_fault", nblob);
		break;
	default:
		if (no_hdr(c->kind)) {
			/* The object and this binary, each remembered. */
			bad += grew_by(a, b, c->counter, 2);
			bad += grew_by(a, b, "no_tables", 2 * nblob);
		} else {
			bad += grew_by(a, b, c->counter, nblob);
		}
		break;
	}
	if (!steps(c->kind) && tf != 0) {
		ksft_print_msg("  table_frames grew by %lld\n", (long long)tf);
		bad++;
	}
	for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
		int64_t v = stats_delta(a, b, refused[i]);

		if (!may_grow(c, refused[i]) && v != 0) {
			ksft_print_msg("  %s grew by %lld\n", refused[i], (long long)v);
			bad++;
		}
	}
	return bad;
}

static const char *case_says(enum kind kind)
{
	switch (kind) {
	case K_VALID:
		return "table_frames, exactly [blob, ht_caller, ht_outer, ..., main, __libc_start_call_main]";
	case K_CFA_ODD:
		return "CFA rsp+4 (not word-aligned) refused, refused_cfa_unaligned, exactly [blob, ht_outer, ...]";
	case K_BUDGET:
		return "budget_exhausted in every walk, exactly [blob, (blob+1) x " STR(NR_FP_FRAMES) ", ht_caller, ht_outer, ...]";
	case K_LOOKUPS:
		return "lookups_capped, the first walk exactly [blob, " STR(MAX_LOOKUPS) " pads, ht_caller, ...], the others [blob, " STR(NR_OBJS) " - 1 pads, ht_ret_enter, ht_caller, ...]";
	case K_CHURN:
		return "every record exactly [blob, ht_caller, ht_outer, ...] or [blob, ht_outer, ...]";
	case K_HOTPLUG:
		return "CPU 1 offline and online under the sampling: table_frames, exactly [blob, ht_caller, ht_outer, ...]";
	default:
		return no_hdr(kind) ? "no_eh_frame, exactly [blob, ht_outer, ..., main, __libc_start_call_main]" :
		       "refused, exactly [blob, ht_outer, ..., main, __libc_start_call_main]";
	}
}

static __attribute__((noipa)) void test_case(const struct tcase *c, bool tables)
{
	char path[] = "/tmp/dht-XXXXXX";
	struct perf_event_attr attr;
	struct dc_log log = { 0 };
	struct dc_stats before, after;
	uint64_t ras[NR_OBJS - 1];
	bool stats = false;
	size_t bad = 0, nblob = 0, exact = 0, other = 0, first = 0, min_blob;
	unsigned int cpus = 0;	/* bit n: a blob record of an entry on CPU n */
	struct timespec t0, t1;
	pid_t pid;
	int err;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	memset((void *)ctl, 0, sizeof(*ctl));
	err = write_case(c, path);
	if (err) {
		ksft_test_result_fail("%s: writing %s: %s\n", c->name, path, strerror(-err));
		return;
	}
	blob_lo = blob_hi = 0;
	cur_kind = c->kind;
	cur_want = c->want ? c->want : WANT_BLOB_RECORDS;
	min_blob = cur_want < MIN_BLOB_RECORDS ? cur_want : MIN_BLOB_RECORDS;
	offlines = 0;
	if (c->kind == K_HOTPLUG && access(CPU1_ONLINE, W_OK)) {
		ksft_test_result_skip("%s: no %s\n", c->name, CPU1_ONLINE);
		unlink(path);
		return;
	}
	dc_attr_init(&attr, PERIOD_NS, true);
	if (tables)
		stats = dc_stats_read(&before);
	pid = run_case(path, &attr, &log);
	if (tables)
		stats = stats && dc_stats_read(&after);
	unlink(path);
	if (pid < 0) {
		ksft_test_result_fail("%s: running the case: %s\n", c->name, strerror(-pid));
		dc_log_free(&log);
		return;
	}
	for (int i = 0; i < NR_OBJS - 1; i++)
		ras[i] = ctl->ras[i];

	if (log.lost || log.malformed) {
		ksft_print_msg("  %llu records lost, %llu malformed\n",
			       (unsigned long long)log.lost,
			       (unsigned long long)log.malformed);
		bad++;
	}
	for (size_t i = 0; i < log.nr_samples; i++) {
		struct dc_sample *s = &log.samples[i];
		long idx, n;

		if (s->pid != (uint32_t)pid || s->tid != (uint32_t)pid ||
		    !s->ends_deferred || !s->cookie) {
			if (bad++ < 5)
				ksft_print_msg("  sample %zu (ip %#llx): no cookie\n",
					       i, (unsigned long long)s->ip);
			continue;
		}
		idx = dc_find_deferred(&log, s->pid, s->tid, s->cookie, &n);
		if (n != 1) {
			if (bad++ < 5)
				ksft_print_msg("  sample %zu: cookie %#llx has %ld records\n",
					       i, (unsigned long long)s->cookie, n);
			continue;
		}
		log.deferred[idx].matched++;
	}
	for (size_t i = 0; i < log.nr_deferred; i++) {
		struct dc_deferred *d = &log.deferred[i];
		int which;

		if (d->pid != (uint32_t)pid || d->tid != (uint32_t)pid ||
		    d->misc != PERF_RECORD_MISC_USER || !d->matched || !d->nr) {
			if (bad++ < 5)
				ksft_print_msg("  record %zu: pid %u tid %u misc %#x, %d samples, %u entries\n",
					       i, d->pid, d->tid, d->misc, d->matched, d->nr);
			continue;
		}
		for (uint32_t j = 0; j < d->nr; j++) {
			if (d->ips[j] >= DC_USER_MAX) {
				if (bad++ < 5)
					print_record("not a user address", d);
				break;
			}
		}
		if (!in_blob(d))
			continue;
		which = chain_of(c->kind, d, ras);
		/* The cookie's low half is the entry's CPU + 1 (both kernels). */
		if ((uint32_t)d->cookie >= 1 && (uint32_t)d->cookie <= 32)
			cpus |= 1u << ((uint32_t)d->cookie - 1);
		if (!nblob++)
			first = which;
		if (which == 1) {
			exact++;
		} else if (which == 2) {
			other++;
		} else if (tables && bad++ < 5) {
			print_record("wrong chain", d);
		}
	}
	if (nblob < min_blob) {
		ksft_print_msg("  only %zu records start in the blob (%zu needed)\n",
			       nblob, min_blob);
		bad++;
	}
	/*
	 * lookups: the first walk of the blob looks the mappings up, at most
	 * MAX_LOOKUPS of them; the second finds those in the mm's cache and
	 * looks up the rest (NR_OBJS - MAX_LOOKUPS, and this binary): only
	 * the first is capped.
	 */
	if (tables && c->kind == K_LOOKUPS && (first != 2 || other != 1)) {
		ksft_print_msg("  the first record is %s, %zu capped records: want the first alone\n",
			       first == 2 ? "capped" : first == 1 ? "whole" : "neither", other);
		bad++;
	}

	/*
	 * hotplug: the child's entries ran on CPU 1 and, while it was
	 * offline, on CPU 0; CPU 1 went offline HOTPLUG_CYCLES times at least.
	 */
	if (c->kind == K_HOTPLUG && (offlines < HOTPLUG_CYCLES || (cpus & 3) != 3)) {
		ksft_print_msg("  CPU 1 offline %d times, blob records of CPUs %#x: want %d and CPUs 0 and 1\n",
			       offlines, cpus, HOTPLUG_CYCLES);
		bad++;
	}
	if (tables && !stats) {
		ksft_print_msg("  cannot read %s/stats\n", DC_UW_DIR);
		bad++;
	} else if (tables) {
		bad += check_counters(c, &before, &after, nblob);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ksft_print_msg("%s: %zu samples, %zu records, %zu in the blob, %zu exact, %zu other, %zu problems; %ld ms\n",
		       c->name, log.nr_samples, log.nr_deferred, nblob, exact, other, bad,
		       (long)((t1.tv_sec - t0.tv_sec) * 1000 +
			      (t1.tv_nsec - t0.tv_nsec) / 1000000));
	if (c->kind == K_CHURN)
		ksft_print_msg("  churn: %d mapping changes and rewrites\n", ctl->churns);
	if (c->kind == K_HOTPLUG)
		ksft_print_msg("  hotplug: CPU 1 offline %d times, blob records of CPUs %#x\n",
			       offlines, cpus);
	ksft_test_result(!bad, "%s: %s\n", c->name,
			 !tables ? "invariants only (no tables)" : case_says(c->kind));
	dc_log_free(&log);
}

/* ---------------- dry run ---------------- */

static int dry_run(const char *dir)
{
	int fails = 0;

	ctl->stop = 1;	/* one read per call */

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct tcase *c = &cases[i];
		char path[512];
		int err;

		if (dir)
			snprintf(path, sizeof(path), "%s/%s.elf", dir, c->name);
		else
			snprintf(path, sizeof(path), "/tmp/dht-XXXXXX");
		err = write_case(c, path);
		cur_kind = c->kind;
		if (err || map_objects(path)) {
			printf("%s: %s: %s\n", c->name, path, err ? strerror(-err) : "map failed");
			fails++;
			continue;
		}
		for (int k = 0; k < 3; k++) {
			memset(read_buf, 0xff, 64);
			ht_outer();	/* the child's chain: ht_outer -> ht_caller -> (entry) -> blob */
			if (read_buf[0] || read_buf[63]) {
				printf("%s: the blob did not read\n", c->name);
				fails++;
			}
		}
		printf("%s: %s mapped at %p, blob called 3 times and returned\n",
		       c->name, path, (void *)map_base);
		munmap(map_base, case_size(c->kind));	/* (lookups: the others stay) */
		if (!dir)
			unlink(path);
	}
	return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
	bool tables;

	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	read_buf = mmap(NULL, READ_SIZE, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	zero_fd = open("/dev/zero", O_RDONLY);
	if (ctl == MAP_FAILED || read_buf == MAP_FAILED || zero_fd < 0) {
		perror("setup");
		return 1;
	}
	if (argc > 1 && !strcmp(argv[1], "--dry-run"))
		return dry_run(argc > 2 ? argv[2] : NULL);

	ksft_print_header();
	ksft_set_plan(ARRAY_SIZE(cases));
	if (dc_syms_load())
		ksft_exit_fail_msg("reading the symbol table\n");
	tables = dc_tables_present();
	/* Fail closed: a Rust test kernel has the table walk (see deferred_tables). */
	if (!tables && dc_rust_kernel())
		ksft_exit_fail_msg("Rust kernel without %s: the table walk is missing\n",
				   DC_TABLES_SYSCTL);
	if (tables) {
		int was = dc_tables_hold();

		if (dc_tables_set(1))
			ksft_exit_fail_msg("writing %s/tables\n", DC_UW_DIR);
		ksft_print_msg("tables on (was %s)\n", was == 1 ? "on" : "off");
	} else {
		ksft_print_msg("%s/tables not available: frame pointers only, invariants only\n",
			       DC_UW_DIR);
	}
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		test_case(&cases[i], tables);
	dc_tables_restore();
	dc_finished();
}
