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
 * Checked for every case, on every kernel: each sample of the child has a
 * cookie and each cookie exactly one record of the child, MISC_USER,
 * non-empty, user addresses only; nothing lost; at least MIN_BLOB_RECORDS
 * records start in the blob.  Without the tables switch (upstream C) only
 * these are asserted.
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
#define EH_MAX		(0x1800 - EH_OFF)

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
	".globl ht_blob_end\n"
	"ht_blob_end:\n"
	".size ht_blob, . - ht_blob\n"
	".popsection\n");

extern const char ht_blob[], ht_blob_end[];
typedef void (*blob_fn)(long fd, void *buf, long len, long unused,
			volatile int *stop);

struct ctl {
	volatile int ready, go, stop;
	volatile int err;
	volatile uint64_t blob;	/* where the child mapped the blob */
};

static struct ctl *ctl;
static int zero_fd;
static char *read_buf;
static char *map_base;		/* the child's (or dry run's) mapping */

enum kind { K_GARBAGE, K_HUGE_COUNT, K_CIE_SELF, K_CFA_SP0, K_CFA_SP_M8,
	    K_CFA_HUGE, K_REMEMBER, K_MANY_OPS, K_TRUNCATED, K_VALID };

struct tcase {
	const char *name;
	enum kind kind;
	const char *counter;	/* the stats counter that must grow */
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
};

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

/*
 * The CIE at EH_OFF: version 1, "zR", code align 1, data align -8, RA
 * column 16, pointers pcrel|sdata4; DW_CFA_def_cfa rsp+8, DW_CFA_offset
 * r16 at CFA-8.  Returns its size.
 */
static size_t put_cie(unsigned char *f)
{
	static const unsigned char body[] = {
		0, 0, 0, 0,		/* CIE id */
		1, 'z', 'R', 0,		/* version, augmentation */
		1, 0x78, 16,		/* code align, data align -8, RA column */
		1, 0x1b,		/* augmentation data: pcrel|sdata4 */
		0x0c, 7, 8,		/* DW_CFA_def_cfa rsp, 8 */
		0x90, 1,		/* DW_CFA_offset r16, CFA - 8 */
		0, 0,			/* padding (nops) */
	};

	put32(f + EH_OFF, sizeof(body));
	memcpy(f + EH_OFF + 4, body, sizeof(body));
	return 4 + sizeof(body);
}

/* An FDE at @off for the blob, CIE at @cie, with @insns.  Returns its size. */
static size_t put_fde(unsigned char *f, size_t off, size_t cie,
		      const unsigned char *insns, size_t n, size_t blob_len)
{
	size_t len = 4 + 4 + 4 + 1 + n, pad = (4 - len % 4) % 4;

	put32(f + off, len + pad);
	put32(f + off + 4, off + 4 - cie);			/* CIE pointer */
	put32(f + off + 8, (uint32_t)(BLOB_OFF - (off + 8)));	/* pc_begin, pcrel */
	put32(f + off + 12, blob_len);				/* pc_range */
	f[off + 16] = 0;					/* augmentation data */
	memcpy(f + off + 17, insns, n);
	memset(f + off + 17 + n, 0, pad);
	return 4 + len + pad;
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
	put32(f + hdr + 4, (uint32_t)(EH_OFF - (hdr + 4)));
	put32(f + hdr + 8, count);
	put32(f + hdr + 12, (uint32_t)(BLOB_OFF - hdr));
	put32(f + hdr + 16, (uint32_t)(fde - hdr));
	return 20;
}

static void build(unsigned char *f, enum kind kind)
{
	static const char shstr[] = "\0.text\0.eh_frame_hdr\0.eh_frame\0.shstrtab";
	size_t blob_len = ht_blob_end - ht_blob, hdr = HDR_OFF, hdr_len = 20;
	size_t eh_len, fde = 0, n = 0;
	unsigned char ins[5000];
	Elf64_Ehdr *eh = (Elf64_Ehdr *)f;
	Elf64_Phdr *ph = (Elf64_Phdr *)(f + sizeof(*eh));
	Elf64_Shdr *sh = (Elf64_Shdr *)(f + SHDR_OFF);

	memset(f, 0, FILE_SIZE);
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

	eh_len = put_cie(f);
	fde = EH_OFF + eh_len;
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
		} else {
			ins[n++] = 0;		/* the CIE's rules: rsp+8, RA at CFA-8 */
		}
		eh_len += put_fde(f, fde, EH_OFF, ins, n, blob_len);
		hdr_len = put_hdr(f, hdr, fde, 1);
		break;
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
	}

	ph[0].p_type = PT_LOAD;
	ph[0].p_flags = PF_R | PF_X;
	ph[0].p_filesz = ph[0].p_memsz = FILE_SIZE;
	ph[0].p_align = PAGE;
	ph[1].p_type = PT_GNU_EH_FRAME;
	ph[1].p_flags = PF_R;
	ph[1].p_offset = ph[1].p_vaddr = ph[1].p_paddr = hdr;
	ph[1].p_filesz = ph[1].p_memsz = hdr_len;
	ph[1].p_align = 4;

	memcpy(f + SHSTR_OFF, shstr, sizeof(shstr));
	sh[1] = (Elf64_Shdr){ .sh_name = 1, .sh_type = SHT_PROGBITS,
		.sh_flags = SHF_ALLOC | SHF_EXECINSTR, .sh_addr = BLOB_OFF,
		.sh_offset = BLOB_OFF, .sh_size = blob_len, .sh_addralign = 1 };
	sh[2] = (Elf64_Shdr){ .sh_name = 7, .sh_type = SHT_PROGBITS,
		.sh_flags = SHF_ALLOC, .sh_addr = hdr, .sh_offset = hdr,
		.sh_size = hdr_len, .sh_addralign = 4 };
	sh[3] = (Elf64_Shdr){ .sh_name = 21, .sh_type = SHT_PROGBITS,
		.sh_flags = SHF_ALLOC, .sh_addr = EH_OFF, .sh_offset = EH_OFF,
		.sh_size = eh_len, .sh_addralign = 8 };
	sh[4] = (Elf64_Shdr){ .sh_name = 31, .sh_type = SHT_STRTAB,
		.sh_offset = SHSTR_OFF, .sh_size = sizeof(shstr), .sh_addralign = 1 };
}

/* Write the case's object to @path (created with mkstemp if it ends in X). */
static int write_case(const struct tcase *c, char *path)
{
	static unsigned char f[FILE_SIZE];
	int fd, ok;

	_Static_assert(SHDR_OFF + NR_SHDRS * sizeof(Elf64_Shdr) <= BLOB_OFF, "layout");
	build(f, c->kind);
	fd = strchr(path, 'X') ? mkstemp(path) : open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0)
		return -errno;
	ok = write(fd, f, FILE_SIZE) == (ssize_t)FILE_SIZE;
	close(fd);
	return ok ? 0 : -EIO;
}

/* Map @path at offset 0 with the page after it unmapped. */
static char *map_case(const char *path)
{
	int fd = open(path, O_RDONLY);
	char *p, *q;

	if (fd < 0)
		return NULL;
	p = mmap(NULL, FILE_SIZE + PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return NULL;
	}
	q = mmap(p, FILE_SIZE, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fd, 0);
	close(fd);
	if (q != p || munmap(p + FILE_SIZE, PAGE)) {
		munmap(p, FILE_SIZE + PAGE);
		return NULL;
	}
	return p;
}

/* ---------------- the child's frames ---------------- */

__attribute__((noipa)) void ht_caller(void)
{
	blob_fn blob = (blob_fn)(map_base + BLOB_OFF);

	DC_KEEP_FRAME();
	blob(zero_fd, read_buf, READ_SIZE, 0, &ctl->stop);
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

static __attribute__((noipa)) void child(const char *path)
{
	map_base = map_case(path);
	if (!map_base) {
		ctl->err = ENOMEM;
		_exit(1);
	}
	ctl->blob = (uintptr_t)map_base + BLOB_OFF;
	ctl->ready = 1;
	while (!ctl->go)
		;
	ht_outer();
	asm volatile("" ::: "memory");
	for (;;)
		raise(SIGSTOP);
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
	long start, t;
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
		if (!ctl->stop && ((t >= MIN_RUN_MS &&
				    blob_records(log) >= WANT_BLOB_RECORDS) ||
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

/* ips[1..] exactly @want (return addresses: looked up at ip - 1). */
static bool chain_is(const struct dc_deferred *d, const char *const *want, int n)
{
	if (d->nr != (uint32_t)n + 1)
		return false;
	for (int i = 0; i < n; i++)
		if (!dc_sym_is(d->ips[i + 1] - 1, want[i]))
			return false;
	return true;
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
	printf("\n");
}

static const char *const refused[] = {
	"refused_no_table", "refused_no_fde", "refused_fault", "refused_malformed",
	"refused_encoding", "refused_augmentation", "refused_opcode",
	"refused_ra_column", "refused_ra_rule", "refused_fp_rule",
	"refused_cfa_register", "refused_cfa_expression", "refused_fp_unknown",
	"refused_cfa_not_above", "refused_bound",
};

static __attribute__((noipa)) void test_case(const struct tcase *c, bool tables)
{
	char path[] = "/tmp/dht-XXXXXX";
	struct perf_event_attr attr;
	struct dc_log log = { 0 };
	struct dc_stats before, after;
	bool stats = false;
	size_t bad = 0, nblob = 0, exact = 0;
	const char *const *want = c->kind == K_VALID ? chain_valid : chain_fp;
	int nwant = c->kind == K_VALID ? ARRAY_SIZE(chain_valid) : ARRAY_SIZE(chain_fp);
	pid_t pid;
	int err;

	memset((void *)ctl, 0, sizeof(*ctl));
	err = write_case(c, path);
	if (err) {
		ksft_test_result_fail("%s: writing %s: %s\n", c->name, path, strerror(-err));
		return;
	}
	blob_lo = blob_hi = 0;
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
		nblob++;
		if (chain_is(d, want, nwant)) {
			exact++;
		} else if (tables && bad++ < 5) {
			print_record("wrong chain", d);
		}
	}
	if (nblob < MIN_BLOB_RECORDS) {
		ksft_print_msg("  only %zu records start in the blob (%d needed)\n",
			       nblob, MIN_BLOB_RECORDS);
		bad++;
	}

	if (tables && !stats) {
		ksft_print_msg("  cannot read %s/stats\n", DC_UW_DIR);
		bad++;
	} else if (tables) {
		int64_t main_d = stats_delta(&before, &after, c->counter);
		int64_t tf = stats_delta(&before, &after, "table_frames");
		uint64_t need = c->kind == K_GARBAGE ? 2 : nblob;
		int64_t nt = stats_delta(&before, &after, "no_tables");

		ksft_print_msg("  %s %+lld, table_frames %+lld, no_eh_frame %+lld, walks %+lld\n",
			       c->counter, (long long)main_d, (long long)tf,
			       (long long)stats_delta(&before, &after, "no_eh_frame"),
			       (long long)stats_delta(&before, &after, "walks"));
		if (main_d < 0 || (uint64_t)main_d < need) {
			ksft_print_msg("  %s grew by %lld, want at least %llu\n",
				       c->counter, (long long)main_d,
				       (unsigned long long)need);
			bad++;
		}
		if (c->kind == K_GARBAGE && (nt < 0 || (uint64_t)nt < 2 * nblob)) {
			ksft_print_msg("  no_tables grew by %lld, want at least %zu\n",
				       (long long)nt, 2 * nblob);
			bad++;
		}
		if (c->kind != K_VALID && tf != 0) {
			ksft_print_msg("  table_frames grew by %lld\n", (long long)tf);
			bad++;
		}
		for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
			int64_t v = stats_delta(&before, &after, refused[i]);

			if (strcmp(refused[i], c->counter) && v != 0) {
				ksft_print_msg("  %s grew by %lld\n", refused[i], (long long)v);
				bad++;
			}
		}
	}
	ksft_print_msg("%s: %zu samples, %zu records, %zu in the blob, %zu exact, %zu problems\n",
		       c->name, log.nr_samples, log.nr_deferred, nblob, exact, bad);
	ksft_test_result(!bad, "%s: %s\n", c->name,
			 !tables ? "invariants only (no tables)" :
			 c->kind == K_VALID ? "table_frames, exactly [blob, ht_caller, ht_outer, ..., main, __libc_start_call_main]" :
			 c->kind == K_GARBAGE ? "no_eh_frame, exactly [blob, ht_outer, ..., main, __libc_start_call_main]" :
			 "refused, exactly [blob, ht_outer, ..., main, __libc_start_call_main]");
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
		map_base = err ? NULL : map_case(path);
		if (!map_base) {
			printf("%s: %s: %s\n", c->name, path, err ? strerror(-err) : "map failed");
			fails++;
			continue;
		}
		for (int k = 0; k < 3; k++) {
			memset(read_buf, 0xff, 64);
			ht_outer();	/* the child's chain: ht_outer -> ht_caller -> blob */
			if (read_buf[0] || read_buf[63]) {
				printf("%s: the blob did not read\n", c->name);
				fails++;
			}
		}
		printf("%s: %s mapped at %p, blob called 3 times and returned\n",
		       c->name, path, (void *)map_base);
		munmap(map_base, FILE_SIZE);
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
	ksft_finished();
}
