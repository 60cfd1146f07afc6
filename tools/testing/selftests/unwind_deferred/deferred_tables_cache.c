// SPDX-License-Identifier: GPL-2.0
/*
 * The Rust unwinder's per-mm cache of compiled unwind rows
 * (mm->unwind_user_tables, src/tables.rs): kept between walks, dropped
 * when the mapping it was made from changes, capped per mm, freed with
 * the mm.  Table unwinding must be on (sysctl kernel.unwind_user_tables,
 * put back as it was at exit).
 *
 * The code walked: two frameless shared libraries (cache_lib.c, -O2
 * -fomit-frame-pointer -fPIC): liba.so with a_run -> a_recurse x depth ->
 * a_leaf, libb.so with b_run -> b_recurse -> b_leaf, the leaf making raw
 * getppid() system calls until told to stop (or PHASE_MS ms of CPU).
 * libb's functions sit at other offsets and its recursion has a bigger
 * frame, so rows of liba used for libb's code at the same address give
 * wrong CFAs.  They are loaded from the directory of this program (/tests
 * in the guest), with dlopen() or by hand (mmap of the file's PT_LOAD
 * segments, the way ld.so maps them; the libraries need no relocation).
 *
 * Each case runs a child process (fork of this one, also frameless: -O2
 * -fomit-frame-pointer, dynamic, -no-pie) through phases.  Its worker
 * threads (1, or 4 in case 4) wait for a go byte in thread_main(), call
 * the current library's X_run(depth, PHASE_MS, &stop) and report back,
 * all with raw system calls, so that everything they execute is
 * thread_main and the library.  The parent sets stop once it has read
 * LEAF_TARGET records starting in the leaf from every worker (under TCG
 * a walk of these stacks costs a few ms of the thread's CPU time: the
 * phases' lengths adapt).  The child's main thread is the helper:
 * unprofiled, it changes the mappings with libc as it likes (dlopen,
 * dlclose, mmap, mprotect, mremap, fork) while the workers wait, starts
 * them, waits for them, then stops the process (SIGSTOP).  Before the
 * first phase the parent opens a per-thread cpu-clock event at 1 kHz
 * with defer_callchain on every worker (dc_attr_init), and at every stop
 * it has every record of the phase (a group stop runs every pending
 * task_work first; the one sample taken in the stop itself gets its
 * record, a thread_main one, when the child is continued), reads the
 * unwind counters (debugfs unwind_user/stats: nothing else is sampled
 * while this test runs, so their deltas are this child's) and the
 * child's /proc/PID/maps, which names the libraries' frames of that
 * phase.
 *
 * Every record of every worker must be an exact whole chain:
 *
 *   X_leaf <- X_recurse x depth <- X_run <- thread_main <- R1 <- R2
 *
 * with X the phase's library and depth the worker's, or a suffix of it
 * starting in X_recurse (1..depth of them), X_run or thread_main (samples
 * outside the leaf; case 5 has hop_15 <- ... <- hop_0 before
 * thread_main, and suffixes starting in a hop), where R1 is the return
 * address into libc's start_thread (thread_main reads it:
 * __builtin_return_address(0)) and
 * R2 one return address in libc's clone3 (local: no .dynsym name; the
 * same in every record), whose CFI ends the stack.  Each phase must have
 * at least MIN_LEAF records starting in X_leaf per worker.  And the
 * counters account for every record, exactly: walks = records, row_hits +
 * row_misses = their entries (one row lookup per entry, the last one
 * finding the end of the stack), table_frames = entries - records,
 * end_of_stack = records, and no frame-pointer frame, refusal, missing
 * object or tables, budget or lookup cap.  Cases 1-7 test each mm's own
 * rows (sysctl kernel.unwind_user_tables_shared = 0, put back at exit: the
 * rows of the vDSO and of files whose page cache cannot be read are always
 * an mm's own), case 8 the rows compiled from files and shared by every
 * mm (case 9 too).  The cases (KTAP tests 1-3, 4-6, 7-11, 12-14, 15-17,
 * 18-21, 22, 23-26, 27-29):
 *
 * 1. warm: the same workload twice in one process, a grandchild forked
 *    (its new mm must not share the cache) and gone in between: the
 *    second run has no row miss and no object lookup, every lookup a hit.
 * 2. dlclose(liba), dlopen(libb): the loader puts libb where liba was
 *    (same span: both are 4 pages; top-down mmap gives the freed range
 *    back); whether it did is printed, and if it did not, libb is
 *    dlclose()d and mapped by hand at liba's address (MAP_FIXED_NOREPLACE
 *    over the freed range).  Then liba is mapped by hand over libb's
 *    range with MAP_FIXED (no unmapped moment).  Chains name the mapped
 *    library's functions; revalidations grow; the replaced object's rows
 *    are compiled again: row_misses = its functions met (counted from the
 *    records), one object lookup.
 * 3. mprotect of liba's code to rwx and back (one VMA, same range, file,
 *    offset: rows kept, no miss, no lookup); munmap of all of liba and a
 *    remap of its segments at the same place from a new open() (another
 *    struct file: dropped, its functions' rows compiled again); mremap of
 *    every VMA of liba by the same distance (moved: dropped, compiled
 *    again at the new place, chains at the new addresses).
 * 4. four threads at depths 12, 19, 26, 33 run at once (both CPUs, their
 *    walks take the mm's cache one after the other): every record exact
 *    with its thread's depth, each thread its leaf records, the threads'
 *    sample times overlap; the second run has no miss.  A third run
 *    while the helper churns the mappings (liba's code rwx and r-x again,
 *    libb mapped by hand elsewhere, unmapped and mapped again, in a
 *    loop): walks revalidate, some in the middle of the churn, and keep
 *    every row (no miss, no lookup), every record exact.
 * 5. kernel.unwind_user_tables_max_kb = 1 (put back at exit), the workers
 *    calling X_run through 16 more functions of this program (hop_0 ..
 *    hop_15 between thread_main and X_run: about 1.5 KiB of rows per walk,
 *    while the chain of the other cases needs about 0.5 KiB): evictions in
 *    both runs under the cap, chains exact, cache_bytes above its value
 *    before the child at most 3 KiB + 4 KiB (a walk evicts when the mm
 *    holds the cap or more before it compiles an FDE: the mm's rows are
 *    below 1 KiB before that compile, which at most doubles each of the
 *    two vectors, < 1 KiB each, and adds its rows, a few 16-byte rows
 *    here: 4 KiB is generous); with the cap put back, no eviction, and
 *    then no miss.
 * 6. the shrinker: after a first run, with the child stopped, reclaim is
 *    asked to drop every slab cache it can (vm.drop_caches = 2:
 *    drop_slab() calls every shrinker until little more is freed), and
 *    the unwinder's shrinker empties every mm's cache no walk holds:
 *    cache_bytes (the rows of every mm: nothing else is sampled, every
 *    cache is idle) goes from above 0 to exactly 0, and shrunk grows by
 *    exactly what it held.  Then the same run again compiles again what
 *    the first compiled: its row_misses beyond the library's functions
 *    met (the program's and libc's functions: thread_main, start_thread,
 *    clone3) and its object lookups equal the first run's; chains exact.
 * 7. exit frees: for every child, cache_bytes before its fork, at its
 *    last stop (must be above: it held rows) and once it is gone (must be
 *    at most the value before: no other process is sampled, so no other
 *    cache can grow meanwhile: bound 0).  The children end differently:
 *    exit_group() (1, 4), SIGKILL while stopped (2, 5), execve() (3: the
 *    bytes are read while the new image is alive and stopped, then again
 *    after SIGKILL).
 * 8. shared (kernel.unwind_user_tables_shared = 1): reclaim first drops
 *    every file's rows that no mm uses (files_cached 0 after it); child A
 *    compiles (row_misses > 0) into three new entries (files_cached +3:
 *    liba, this program, libc; one lookup each, files_found 0); child B,
 *    the same program and library in a new process once A is gone, finds
 *    the three (files_found 3 = lookups) and compiles nothing (row_misses
 *    0, row_hits = its entries); chains exact in both.
 * 9. rewrite (shared): child C dlopen()s a copy of liba (libcopy.so, on a
 *    ramfs mounted for it: a page cache read by read_mapping_folio(), as
 *    a disk filesystem's, where the initramfs's tmpfs is read by
 *    shmem_read_folio()) and compiles liba's rows from it (files_cached +1;
 *    the program's and libc's entries of case 8 found, files_found 2);
 *    the copy is rewritten in place (O_TRUNC, the same inode) with libb's
 *    bytes; child D dlopen()s the same path: its rows are compiled again
 *    (row_misses = libb's functions met, files_cached +1), its chains
 *    exactly libb's.  Rows of the old contents found for the new would
 *    give wrong CFAs (libb's frames are bigger) and fail its chains.  The
 *    ramfs is unmounted at the end: the registry holds no reference.
 *
 * And for every child, over its whole life: every sample has
 * PERF_CONTEXT_USER_DEFERRED + cookie and exactly one record of its
 * thread, every record a sample, is MISC_USER, non-empty, user addresses
 * only; nothing lost or malformed.  Excused, counted and printed with
 * their kernel stacks: a thread's last sample, taken in the signal path
 * and not the exit path (the final stop), if it has no record; a sample
 * in do_exit() or do_group_exit() (the exit path, as deferred_exit and
 * deferred_races) without a cookie (nothing can be deferred there: perf
 * takes the user stack in place, the arch's frame-pointer walk, or none).
 * A sample of another task, or without a cookie elsewhere, fails; so does
 * a last sample in the exit path without its record: that is upstream C's
 * exit loss (docs/deviations.md), which other tests excuse on C only and
 * only with a tracepoint's evidence of the entry, and this test never
 * checks a C kernel (every case is a SKIP there, see below).
 *
 * Without the tables switch every case is a SKIP on upstream C and a
 * failure on the Rust kernel (fail closed: it must have it).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest.h"
#include "dc_util.h"

/*
 * 1 kHz: under TCG on a loaded host, 10 kHz timer interrupts (and the
 * walks they ask for) can leave a thread little else to do.
 */
#define PERIOD_NS	1000000
#define RING_PAGES	256		/* 1 MiB per worker, drained every 20 ms */
#define PHASE_MS	10000		/* CPU time of a worker's run, at most */
/*
 * Under the 1 KiB cap every walk compiles most of its FDEs again: on the
 * debug kernel (KASAN, lockdep) about 0.4 s of CPU a walk, so 10 s gave
 * 19-21 leaf records where MIN_LEAF wants 20.  The capped runs may take
 * longer; they still stop at LEAF_TARGET leaf records.
 */
#define CAP_PHASE_MS	30000
static unsigned int phase_ms = PHASE_MS;
#define MIN_LEAF	20		/* leaf records per worker and phase */
#define LEAF_TARGET	30		/* leaf records the parent waits for */
#define MAX_WORKERS	4
#define MAX_PHASES	6
#define PHASE_TIMEOUT_S	300
#define KERNEL_MIN	0xffff800000000000ULL
#define CAP_KB		1
#define CAP_SLACK	4096		/* see case 5 above */
#define MAX_KB_SYSCTL	"/proc/sys/kernel/unwind_user_tables_max_kb"
#define SHARED_SYSCTL	"/proc/sys/kernel/unwind_user_tables_shared"
#define RAMFS_DIR	"/tmp/dtc_ramfs"

#define NO_TAIL()	asm volatile("" ::: "memory")
#define FRAME		__attribute__((noipa))

enum { LIBA, LIBB, NR_LIBS };
static const char *const lib_file[NR_LIBS] = { "liba.so", "libb.so" };
static const char lib_letter[NR_LIBS] = { 'a', 'b' };

/* A library's file: path, symbols (link-time), PT_LOAD segments. */
static struct lib {
	char path[512];
	struct dc_dso syms;
	ElfW(Phdr) load[8];	/* its PT_LOAD headers */
	int nload;
	uint64_t span;		/* bytes from the first segment's page */
	uint64_t run_off;	/* X_run, from the first segment's page */
	size_t size;		/* of its file, read into syms.img */
} libs[NR_LIBS];

enum op { OP_RUN, OP_LOAD, OP_SWAP, OP_OVER, OP_MPROTECT, OP_REMAP, OP_MREMAP,
	  OP_FORK, OP_CHURN, OP_EXIT, OP_EXEC };
static const char *const op_name[] = {
	"run again", "dlopen", "dlclose + dlopen", "map by hand over it",
	"mprotect rwx, r-x", "munmap + remap", "mremap", "fork, the grandchild exits",
	"mappings churned during the run", "exit", "execve"
};

/* Shared by the parent and its child (MAP_SHARED). */
struct ctl {
	/* the parent's command */
	int op, lib;
	unsigned int ms;
	int depth[MAX_WORKERS];
	int hops;			/* hop_N frames between thread_main and X_run */
	volatile int stop;		/* the workers' leaves return */
	/* the child's */
	int nworkers;
	pid_t tid[MAX_WORKERS];
	uint64_t ret[MAX_WORKERS];	/* thread_main's return address */
	int cur;			/* the library the workers run */
	uint64_t fn;			/* its X_run */
	uint64_t base[NR_LIBS];		/* where each is mapped, 0: not */
	int churn;			/* rounds of OP_CHURN */
	int err;
	char msg[1024];			/* what the helper did */
};
static struct ctl *ctl;

/* ---------------- the child ---------------- */

typedef uint64_t (*run_fn)(int depth, unsigned int ms, const volatile int *stop);

struct worker {
	int go[2];
	int idx;
};
static struct worker workers[MAX_WORKERS];
static int done_fd[2];

/*
 * Case 5's extra frames: thread_main -> hop_0 -> ... -> hop_(hops-1) ->
 * X_run, 16 more functions (FDEs) of this program, so that one walk's
 * rows are more than the 1 KiB cap.
 */
#define NR_HOPS		16
typedef uint64_t (*hop_fn)(int left, int depth, unsigned int ms);
static const hop_fn hop_tab[NR_HOPS];

#define HOP(i)								\
FRAME uint64_t hop_##i(int left, int depth, unsigned int ms)		\
{									\
	uint64_t r = left > 1 ? hop_tab[(i + 1) % NR_HOPS](left - 1, depth, ms) : \
				((run_fn)(uintptr_t)ctl->fn)(depth, ms, &ctl->stop); \
									\
	NO_TAIL();							\
	return r + i;							\
}
HOP(0) HOP(1) HOP(2) HOP(3) HOP(4) HOP(5) HOP(6) HOP(7)
HOP(8) HOP(9) HOP(10) HOP(11) HOP(12) HOP(13) HOP(14) HOP(15)

static const hop_fn hop_tab[NR_HOPS] = {
	hop_0, hop_1, hop_2, hop_3, hop_4, hop_5, hop_6, hop_7,
	hop_8, hop_9, hop_10, hop_11, hop_12, hop_13, hop_14, hop_15,
};

/* A worker: raw system calls only, so its stack is thread_main's alone. */
FRAME void *thread_main(void *arg)
{
	struct worker *w = arg;
	char c;

	ctl->tid[w->idx] = dc_syscall3(__NR_gettid, 0, 0, 0);
	ctl->ret[w->idx] = (uintptr_t)__builtin_return_address(0);
	dc_syscall3(__NR_write, done_fd[1], (long)"r", 1);
	for (;;) {
		if (dc_syscall3(__NR_read, w->go[0], (long)&c, 1) != 1)
			continue;
		if (ctl->hops)
			hop_tab[0](ctl->hops, ctl->depth[w->idx], ctl->ms);
		else
			((run_fn)(uintptr_t)ctl->fn)(ctl->depth[w->idx], ctl->ms, &ctl->stop);
		NO_TAIL();
		dc_syscall3(__NR_write, done_fd[1], (long)"d", 1);
	}
	return NULL;
}

static void say(const char *fmt, ...)
{
	size_t n = strlen(ctl->msg);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ctl->msg + n, sizeof(ctl->msg) - n, fmt, ap);
	va_end(ap);
}

#define FAIL(...) ({ ctl->err = 1; say(__VA_ARGS__); -1; })

static uint64_t page_size(void)
{
	return sysconf(_SC_PAGESIZE);
}

/* Library @l's mappings in this process (from /proc/self/maps). */
static int lib_maps(int l, uint64_t *lo, uint64_t *hi, char (*perm)[8], int max)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[1024];
	int n = 0;

	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long a, b;
		char p[8], *path;
		int pos = 0;

		if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %n", &a, &b, p, &pos) < 3 || !pos)
			continue;
		path = line + pos;
		path[strcspn(path, "\n")] = 0;
		if (strcmp(path, libs[l].path) || n == max)
			continue;
		lo[n] = a;
		hi[n] = b;
		snprintf(perm[n], sizeof(perm[n]), "%s", p);
		n++;
	}
	if (f)
		fclose(f);
	return n;
}

static void set_cur(int l)
{
	ctl->cur = l;
	ctl->fn = ctl->base[l] + libs[l].run_off;
}

/*
 * Map library @l's segments at @at from a new open() of its file, as
 * ld.so does (no relocation needed): over whatever is there (@replace,
 * MAP_FIXED), or only into a free range (MAP_FIXED_NOREPLACE first).
 */
static int hand_map(int l, uint64_t at, bool replace)
{
	const struct lib *L = &libs[l];
	uint64_t pg = page_size();
	int fd = open(L->path, O_RDONLY);

	if (fd < 0)
		return FAIL("open %s: %s. ", L->path, strerror(errno));
	if (!replace && mmap((void *)at, L->span, PROT_NONE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) !=
			(void *)at) {
		close(fd);
		return FAIL("reserving %#llx+%#llx: %s. ", (unsigned long long)at,
			    (unsigned long long)L->span, strerror(errno));
	}
	for (int i = 0; i < L->nload; i++) {
		const ElfW(Phdr) *ph = &L->load[i];
		uint64_t base0 = L->load[0].p_vaddr & ~(pg - 1);
		uint64_t s = at + (ph->p_vaddr & ~(pg - 1)) - base0;
		uint64_t fe = at + ph->p_vaddr + ph->p_filesz - base0;
		uint64_t me = at + ph->p_vaddr + ph->p_memsz - base0;
		uint64_t fpe = (fe + pg - 1) & ~(pg - 1), mpe = (me + pg - 1) & ~(pg - 1);
		int prot = (ph->p_flags & PF_R ? PROT_READ : 0) |
			   (ph->p_flags & PF_W ? PROT_WRITE : 0) |
			   (ph->p_flags & PF_X ? PROT_EXEC : 0);

		if (mmap((void *)s, fpe - s, prot, MAP_PRIVATE | MAP_FIXED, fd,
			 ph->p_offset & ~(pg - 1)) != (void *)s) {
			close(fd);
			return FAIL("mmap of %s's segment %d at %#llx: %s. ", lib_file[l], i,
				    (unsigned long long)s, strerror(errno));
		}
		if ((prot & PROT_WRITE) && fpe > fe)
			memset((void *)fe, 0, fpe - fe);
		if (mpe > fpe &&
		    mmap((void *)fpe, mpe - fpe, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			 -1, 0) != (void *)fpe) {
			close(fd);
			return FAIL("bss of %s: %s. ", lib_file[l], strerror(errno));
		}
	}
	close(fd);
	ctl->base[l] = at;
	return 0;
}

static void *handle[NR_LIBS];

static int dl_load(int l)
{
	struct link_map *lm;
	void *run;
	char name[16];

	handle[l] = dlopen(libs[l].path, RTLD_NOW | RTLD_LOCAL);
	if (!handle[l])
		return FAIL("dlopen %s: %s. ", libs[l].path, dlerror());
	snprintf(name, sizeof(name), "%c_run", lib_letter[l]);
	run = dlsym(handle[l], name);
	if (dlinfo(handle[l], RTLD_DI_LINKMAP, &lm) || !run)
		return FAIL("dlinfo/dlsym %s: %s. ", lib_file[l], dlerror());
	ctl->base[l] = lm->l_addr;	/* its first segment is at 0 */
	if ((uintptr_t)run != ctl->base[l] + libs[l].run_off)
		return FAIL("%s at %p, not at base %#llx + %#llx. ", name, run,
			    (unsigned long long)ctl->base[l],
			    (unsigned long long)libs[l].run_off);
	say("dlopen(%s): at %#llx. ", lib_file[l], (unsigned long long)ctl->base[l]);
	return 0;
}

/* dlclose() the current library, dlopen() @l where it was (by hand if need be). */
static int op_swap(int l)
{
	int o = ctl->cur;
	uint64_t was = ctl->base[o], lo[8], hi[8];
	char perm[8][8];

	if (dlclose(handle[o]))
		return FAIL("dlclose %s: %s. ", lib_file[o], dlerror());
	handle[o] = NULL;
	ctl->base[o] = 0;
	if (lib_maps(o, lo, hi, perm, 8))
		return FAIL("%s still mapped after dlclose(). ", lib_file[o]);
	if (dl_load(l))
		return -1;
	if (ctl->base[l] == was) {
		say("REUSED: the loader put %s at %s's address. ", lib_file[l], lib_file[o]);
	} else {
		say("NOT REUSED: the loader put %s at %#llx, not %#llx: dlclose() it and map it by hand at %#llx. ",
		    lib_file[l], (unsigned long long)ctl->base[l], (unsigned long long)was,
		    (unsigned long long)was);
		if (dlclose(handle[l]))
			return FAIL("dlclose %s: %s. ", lib_file[l], dlerror());
		handle[l] = NULL;
		if (hand_map(l, was, false))
			return -1;
	}
	set_cur(l);
	return 0;
}

/* Map @l by hand over the current library's range (MAP_FIXED). */
static int op_over(int l)
{
	int o = ctl->cur;
	uint64_t at = ctl->base[o];

	if (hand_map(l, at, true))
		return -1;
	handle[o] = NULL;	/* replaced: never dlclose()d */
	ctl->base[o] = 0;
	say("%s mapped by hand over %s at %#llx (MAP_FIXED). ", lib_file[l], lib_file[o],
	    (unsigned long long)at);
	set_cur(l);
	return 0;
}

static int op_mprotect(void)
{
	int l = ctl->cur, n, i;
	uint64_t lo[8], hi[8];
	char perm[8][8];

	n = lib_maps(l, lo, hi, perm, 8);
	for (i = 0; i < n && strcmp(perm[i], "r-xp"); i++)
		;
	if (i == n)
		return FAIL("no r-xp mapping of %s. ", lib_file[l]);
	if (mprotect((void *)lo[i], hi[i] - lo[i], PROT_READ | PROT_WRITE | PROT_EXEC) ||
	    mprotect((void *)lo[i], hi[i] - lo[i], PROT_READ | PROT_EXEC))
		return FAIL("mprotect: %s. ", strerror(errno));
	say("mprotect(%#llx-%#llx) rwx, then r-x; ", (unsigned long long)lo[i],
	    (unsigned long long)hi[i]);
	n = lib_maps(l, lo, hi, perm, 8);
	for (i = 0; i < n; i++)
		say("%s%#llx-%#llx %s", i ? ", " : "now ", (unsigned long long)lo[i],
		    (unsigned long long)hi[i], perm[i]);
	say(". ");
	return 0;
}

static int op_remap(void)
{
	int l = ctl->cur;
	uint64_t at = ctl->base[l];

	if (munmap((void *)at, libs[l].span))
		return FAIL("munmap: %s. ", strerror(errno));
	handle[l] = NULL;	/* never dlclose()d */
	if (hand_map(l, at, false))
		return -1;
	say("munmap(%#llx, %#llx), then its segments mapped again there from a new open(). ",
	    (unsigned long long)at, (unsigned long long)libs[l].span);
	return 0;
}

static int op_mremap(void)
{
	int l = ctl->cur, n;
	uint64_t at = ctl->base[l], lo[8], hi[8];
	char perm[8][8];
	void *to = mmap(NULL, libs[l].span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (to == MAP_FAILED)
		return FAIL("mmap: %s. ", strerror(errno));
	n = lib_maps(l, lo, hi, perm, 8);
	for (int i = 0; i < n; i++) {
		void *dst = (char *)to + (lo[i] - at);

		if (mremap((void *)lo[i], hi[i] - lo[i], hi[i] - lo[i],
			   MREMAP_MAYMOVE | MREMAP_FIXED, dst) != dst)
			return FAIL("mremap %#llx: %s. ", (unsigned long long)lo[i],
				    strerror(errno));
	}
	handle[l] = NULL;
	ctl->base[l] = (uintptr_t)to;
	set_cur(l);
	say("mremap of %s's %d VMAs from %#llx to %p. ", lib_file[l], n,
	    (unsigned long long)at, to);
	return 0;
}

/*
 * fork(): the grandchild gets a new mm (its cache pointer cleared, not
 * the parent's copied) and exits at once; this process's cache must
 * survive that.
 */
static int op_fork(void)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return FAIL("fork: %s. ", strerror(errno));
	if (!pid)
		_exit(0);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return FAIL("grandchild: status %#x. ", st);
	say("a grandchild was forked and exited. ");
	return 0;
}

/*
 * While the workers run: change the mm's mappings over and over, so that
 * walks find the mmap sequence count moved (or the lock held) and check
 * their objects again, some in the middle of a walk: the current
 * library's code made rwx and r-x again (one VMA, same range, file and
 * offset: its rows stay), and the other library, mapped by hand
 * elsewhere, unmapped and mapped again.
 */
static void churn(int nworkers)
{
	int l = ctl->cur, o = !l, n, i, done = 0, rounds = 0;
	uint64_t lo[8], hi[8], at;
	char perm[8][8];
	void *spot;

	n = lib_maps(l, lo, hi, perm, 8);
	for (i = 0; i < n && strcmp(perm[i], "r-xp"); i++)
		;
	spot = mmap(NULL, libs[o].span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (i == n || spot == MAP_FAILED || hand_map(o, (uintptr_t)spot, true)) {
		FAIL("churn: no r-xp mapping of %s, or mapping %s: %s. ", lib_file[l],
		     lib_file[o], strerror(errno));
		return;
	}
	at = (uintptr_t)spot;
	for (int w = 0; w < nworkers; w++)
		if (write(workers[w].go[1], "g", 1) != 1)
			_exit(2);
	while (done < nworkers && !ctl->err) {
		struct pollfd p = { .fd = done_fd[0], .events = POLLIN };
		char c;

		if (poll(&p, 1, 0) == 1 && read(done_fd[0], &c, 1) == 1) {
			done++;
			continue;
		}
		if (mprotect((void *)lo[i], hi[i] - lo[i], PROT_READ | PROT_WRITE | PROT_EXEC) ||
		    mprotect((void *)lo[i], hi[i] - lo[i], PROT_READ | PROT_EXEC) ||
		    munmap((void *)at, libs[o].span) || hand_map(o, at, false))
			FAIL("churn round %d: %s. ", rounds, strerror(errno));
		rounds++;
	}
	say("%d rounds of: %s's code rwx then r-x, %s at %#llx unmapped and mapped again. ",
	    rounds, lib_file[l], lib_file[o], (unsigned long long)at);
	ctl->base[o] = 0;	/* not the workers' library */
	ctl->churn = rounds;
}

static void do_op(void)
{
	switch (ctl->op) {
	case OP_LOAD:
		if (!dl_load(ctl->lib))
			set_cur(ctl->lib);
		break;
	case OP_SWAP:
		op_swap(ctl->lib);
		break;
	case OP_OVER:
		op_over(ctl->lib);
		break;
	case OP_MPROTECT:
		op_mprotect();
		break;
	case OP_REMAP:
		op_remap();
		break;
	case OP_MREMAP:
		op_mremap();
		break;
	case OP_FORK:
		op_fork();
		break;
	default:
		break;
	}
}

/* The child's main thread: the helper. */
static void child_main(int cmd, int nworkers)
{
	pthread_t t;
	char c;

	ctl->nworkers = nworkers;
	if (pipe(done_fd))
		_exit(2);
	for (int i = 0; i < nworkers; i++) {
		workers[i].idx = i;
		if (pipe(workers[i].go) ||
		    pthread_create(&t, NULL, thread_main, &workers[i]))
			_exit(2);
	}
	for (int i = 0; i < nworkers; i++)
		if (read(done_fd[0], &c, 1) != 1)
			_exit(2);
	raise(SIGSTOP);		/* ready: the parent opens the events */
	for (;;) {
		if (read(cmd, &c, 1) != 1)
			_exit(3);
		if (ctl->op == OP_EXIT)
			_exit(0);
		if (ctl->op == OP_EXEC) {
			execl("/proc/self/exe", "deferred_tables_cache", "--stopped", NULL);
			_exit(4);
		}
		if (ctl->op == OP_CHURN) {
			churn(nworkers);
			raise(SIGSTOP);
			continue;
		}
		do_op();
		if (!ctl->err) {
			for (int i = 0; i < nworkers; i++)
				if (write(workers[i].go[1], "g", 1) != 1)
					_exit(2);
			for (int i = 0; i < nworkers; i++)
				if (read(done_fd[0], &c, 1) != 1)
					_exit(2);
		}
		raise(SIGSTOP);
	}
}

/* ---------------- the parent ---------------- */

static struct dc_dso libc_dso;
static uint64_t ret2;		/* the return address into clone3 */
static bool is_rust;
static bool dry_run;		/* --dry-run: no events, no counters */

struct phase {
	int op, lib, cur;
	int depth[MAX_WORKERS], hops;
	size_t rec_lo, rec_hi, smp_lo, smp_hi;	/* its records and samples */
	struct dc_stats st;		/* the counters at its stop */
	struct dc_dso dso[NR_LIBS];	/* the libraries as mapped then */
	uint64_t base;			/* the current library's address */
	int err;
	char msg[1024];
	/* from its records */
	size_t nrec, sum_nr, exact, leaf[MAX_WORKERS], lib_fns;
	uint64_t t_lo[MAX_WORKERS], t_hi[MAX_WORKERS];	/* sample times */
};

struct child {
	const char *name;
	pid_t pid;
	int cmd;
	int nworkers;
	pid_t tid[MAX_WORKERS];
	uint64_t ret[MAX_WORKERS];	/* thread_main's return address */
	struct dc_ring rings[MAX_WORKERS];
	struct dc_log log;
	struct dc_stats st0;		/* the counters before its first phase */
	struct phase ph[MAX_PHASES];
	int nph;
	/* the running phase: records seen, leaf records per worker */
	bool running;
	size_t seen;
	size_t leaves[MAX_WORKERS];
	bool broken;			/* a step of it failed */
	char why[512];
	/* cache_bytes: before the fork, at the last stop, when it is gone */
	uint64_t bytes_before, bytes_alive, bytes_exec, bytes_after;
	const char *end;
	/* its whole log */
	size_t bad_pid, bad_ctx, no_cookie_exit, missing, excused, dup, orphan, bad_rec;
	size_t kaddr, nonuser;
	unsigned int cpus;		/* CPUs seen in cookies (bits) */
};

static uint64_t stat_of(const struct dc_stats *st, const char *name)
{
	uint64_t v = 0;

	if (!dc_stats_get(st, name, &v))
		return UINT64_MAX;
	return v;
}

static uint64_t cache_bytes_now(void)
{
	struct dc_stats st;

	if (!dc_stats_read(&st))
		return UINT64_MAX;
	return stat_of(&st, "cache_bytes");
}

/* Counter @name's growth over phase @k (of the counters read at stops). */
static int64_t delta(const struct child *c, int k, const char *name)
{
	const struct dc_stats *was = k ? &c->ph[k - 1].st : &c->st0;
	uint64_t a = stat_of(&c->ph[k].st, name), b = stat_of(was, name);

	if (a == UINT64_MAX || b == UINT64_MAX)
		return INT64_MIN;	/* no such counter: fails every check */
	return (int64_t)(a - b);
}

/* Sum of the growth of every refused_* counter over phase @k. */
static int64_t refused(const struct child *c, int k)
{
	int64_t n = 0;

	for (int i = 0; i < c->ph[k].st.n; i++)
		if (!strncmp(c->ph[k].st.name[i], "refused_", 8))
			n += delta(c, k, c->ph[k].st.name[i]);
	return n;
}

static void broken(struct child *c, const char *fmt, ...)
{
	va_list ap;

	c->broken = true;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	ksft_print_msg("%s: %s\n", c->name, c->why);
}

/* Read the child's rings, waiting up to @ms for data; false if it has none. */
static bool drain(struct child *c, int ms)
{
	if (!c->nworkers || !c->rings[0].base)
		return false;
	dc_rings_poll_drain(c->rings, c->nworkers, &c->log, ms);
	return true;
}

/*
 * While a phase runs: count the new records that start in the current
 * library's leaf (by address: the exact check comes later), and tell the
 * workers to stop once each has LEAF_TARGET of them.  Under TCG a walk
 * costs milliseconds, so a fixed CPU time gives from a few to hundreds.
 */
static void leaf_progress(struct child *c)
{
	const struct lib *L = &libs[ctl->cur];
	uint64_t size, lo, first = L->load[0].p_vaddr & ~(page_size() - 1);
	char name[16];
	bool done = true;

	if (!c->running || !ctl->fn)
		return;
	snprintf(name, sizeof(name), "%c_leaf", lib_letter[ctl->cur]);
	lo = ctl->base[ctl->cur] + dc_dso_sym(&L->syms, name, &size) - first;
	for (; c->seen < c->log.nr_deferred; c->seen++) {
		const struct dc_deferred *d = &c->log.deferred[c->seen];

		for (int w = 0; w < c->nworkers; w++)
			if ((uint32_t)c->tid[w] == d->tid && d->nr && d->ips[0] >= lo &&
			    d->ips[0] < lo + size)
				c->leaves[w]++;
	}
	for (int w = 0; w < c->nworkers; w++)
		done = done && c->leaves[w] >= LEAF_TARGET;
	if (done)
		ctl->stop = 1;
}

/* Wait until the child stops (true) or is gone, draining its rings. */
static bool wait_stop(struct child *c)
{
	time_t end = time(NULL) + PHASE_TIMEOUT_S;
	int st;

	for (;;) {
		pid_t w;

		if (!drain(c, 20))
			usleep(20000);
		leaf_progress(c);
		w = waitpid(c->pid, &st, WUNTRACED | WNOHANG);
		if (w == c->pid && WIFSTOPPED(st))
			return true;
		if (w == c->pid) {
			broken(c, "the child ended (status %#x) instead of stopping", st);
			c->pid = 0;
			return false;
		}
		if (time(NULL) > end) {
			broken(c, "no stop in %d s", PHASE_TIMEOUT_S);
			return false;
		}
	}
}

static bool child_start(struct child *c, const char *name, int nworkers)
{
	struct perf_event_attr attr;
	int cmd[2];

	memset(c, 0, sizeof(*c));
	c->name = name;
	c->nworkers = nworkers;
	memset(ctl, 0, sizeof(*ctl));
	c->bytes_before = cache_bytes_now();
	if (pipe(cmd))
		ksft_exit_fail_msg("pipe: %s\n", strerror(errno));
	fflush(stdout);
	c->pid = fork();
	if (c->pid < 0)
		ksft_exit_fail_msg("fork: %s\n", strerror(errno));
	if (!c->pid) {
		close(cmd[1]);
		child_main(cmd[0], nworkers);
		_exit(0);
	}
	close(cmd[0]);
	c->cmd = cmd[1];
	if (!wait_stop(c))
		return false;
	for (int i = 0; i < nworkers; i++) {
		c->tid[i] = ctl->tid[i];
		c->ret[i] = ctl->ret[i];
	}
	if (dry_run)
		return true;
	dc_attr_init(&attr, PERIOD_NS, true);
	for (int i = 0; i < nworkers; i++) {
		int err;

		err = dc_ring_open(&c->rings[i], &attr, c->tid[i], -1, RING_PAGES, i);
		if (err) {
			broken(c, "perf_event_open on tid %d: %s", c->tid[i], strerror(-err));
			return false;
		}
	}
	if (dc_rings_ioctl(c->rings, nworkers, PERF_EVENT_IOC_ENABLE)) {
		broken(c, "enabling the events: %s", strerror(errno));
		return false;
	}
	if (!dc_stats_read(&c->st0)) {
		broken(c, "no %s/stats", DC_UW_DIR);
		return false;
	}
	return true;
}

static int dso_for(struct phase *p, pid_t pid)
{
	for (int l = 0; l < NR_LIBS; l++) {
		/* its file's name: lib_file[l], or case 9's copy */
		const char *name = strrchr(libs[l].path, '/');
		int err = dc_dso_find(&p->dso[l], pid, name ? name + 1 : libs[l].path);

		if (err && err != -ENOENT)
			return err;
	}
	return 0;
}

/*
 * One phase: the helper does @op, the workers run (through @hops hop_N
 * frames), the child stops.
 */
static bool child_phase_hops(struct child *c, int op, int lib, const int *depth, int hops)
{
	struct phase *p = &c->ph[c->nph];

	if (c->broken || c->nph == MAX_PHASES)
		return false;
	memset(p, 0, sizeof(*p));
	p->op = op;
	p->lib = lib;
	p->hops = ctl->hops = hops;
	for (int i = 0; i < c->nworkers; i++)
		p->depth[i] = ctl->depth[i] = depth[i];
	ctl->op = op;
	ctl->lib = lib;
	ctl->ms = dry_run ? 50 : phase_ms;
	ctl->stop = 0;
	ctl->err = 0;
	ctl->msg[0] = 0;
	p->rec_lo = c->seen = c->log.nr_deferred;
	p->smp_lo = c->log.nr_samples;
	memset(c->leaves, 0, sizeof(c->leaves));
	c->running = true;
	if (write(c->cmd, "p", 1) != 1 || kill(c->pid, SIGCONT)) {
		broken(c, "commanding the child: %s", strerror(errno));
		return false;
	}
	if (!wait_stop(c))
		return false;
	c->running = false;
	drain(c, 0);
	p->rec_hi = c->log.nr_deferred;
	p->smp_hi = c->log.nr_samples;
	if (!dry_run && !dc_stats_read(&p->st)) {
		broken(c, "no %s/stats", DC_UW_DIR);
		return false;
	}
	c->bytes_alive = stat_of(&p->st, "cache_bytes");
	p->cur = ctl->cur;
	p->base = ctl->base[ctl->cur];
	p->err = ctl->err;
	snprintf(p->msg, sizeof(p->msg), "%s", ctl->msg);
	c->nph++;
	ksft_print_msg("%s phase %d (%s %s): %s%s\n", c->name, c->nph - 1, op_name[op],
		       op == OP_RUN ? "" : lib_file[lib], p->msg,
		       p->err ? " FAILED" : "");
	if (p->err) {
		broken(c, "phase %d: the helper failed: %s", c->nph - 1, p->msg);
		return false;
	}
	if (dso_for(p, c->pid)) {
		broken(c, "reading /proc/%d/maps", c->pid);
		return false;
	}
	return true;
}

static bool child_phase(struct child *c, int op, int lib, const int *depth)
{
	return child_phase_hops(c, op, lib, depth, 0);
}

/* How a child ends: exit_group(), SIGKILL while stopped, or execve(). */
enum end { END_EXIT = OP_EXIT, END_EXEC = OP_EXEC, END_KILL };

static void child_end(struct child *c, enum end how)
{
	char exec[96] = "";
	int st;

	if (c->broken)
		how = END_KILL;
	c->end = how == END_EXIT ? "exit_group()" : how == END_EXEC ? "execve()" : "SIGKILL";
	if (!c->cmd)
		return;		/* never started */
	if (c->pid && how != END_KILL) {
		ctl->op = how;	/* OP_EXIT or OP_EXEC */
		if (write(c->cmd, "e", 1) != 1 || kill(c->pid, SIGCONT))
			broken(c, "commanding the child: %s", strerror(errno));
	}
	if (c->pid && how == END_EXEC && !c->broken && wait_stop(c))
		c->bytes_exec = cache_bytes_now();	/* the new image, stopped */
	if (c->pid && how != END_EXIT)
		kill(c->pid, SIGKILL);
	if (c->pid && waitpid(c->pid, &st, 0) == c->pid && how == END_EXIT &&
	    !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		broken(c, "the child ended with status %#x", st);
	if (drain(c, 0)) {
		dc_rings_ioctl(c->rings, c->nworkers, PERF_EVENT_IOC_DISABLE);
		drain(c, 0);
		dc_rings_close(c->rings, c->nworkers);
	}
	close(c->cmd);
	c->bytes_after = cache_bytes_now();
	if (how == END_EXEC)
		snprintf(exec, sizeof(exec), ", %llu after its execve() (the new image, stopped)",
			 (unsigned long long)c->bytes_exec);
	ksft_print_msg("%s: ended by %s; cache_bytes %llu before its fork, %llu at its last stop%s, %llu once gone\n",
		       c->name, c->end, (unsigned long long)c->bytes_before,
		       (unsigned long long)c->bytes_alive, exec,
		       (unsigned long long)c->bytes_after);
}

/* ---------------- checking the records ---------------- */

static uint64_t faddr(const struct dc_deferred *d, uint32_t i)
{
	return i ? d->ips[i] - 1 : d->ips[i];	/* return addresses: the call */
}

static const char *lib_fn(const struct phase *p, int l, uint64_t a)
{
	return dc_dso_has(&p->dso[l], a) ? dc_dso_name(&p->dso[l], a, NULL, NULL) : NULL;
}

static bool is_lib_fn(const struct phase *p, int l, uint64_t a, const char *fn)
{
	const char *n = lib_fn(p, l, a);

	return n && n[0] == lib_letter[l] && n[1] == '_' && !strcmp(n + 2, fn);
}

static const char *hop_name(int i)
{
	static char names[NR_HOPS][16];

	if (!names[i][0])
		snprintf(names[i], sizeof(names[i]), "hop_%d", i);
	return names[i];
}

static bool libc_local(uint64_t a)
{
	return dc_dso_has(&libc_dso, a) && !dc_dso_name(&libc_dso, a, NULL, NULL);
}

/*
 * Is record @d of worker @w, drained in phase @p, exactly the chain (or
 * one of its suffixes, see the top)?  *@leaf: it starts in the leaf;
 * *@where: the first entry that is not as it should be.
 */
static bool rec_exact(const struct child *c, const struct phase *p,
		      const struct dc_deferred *d, int w, bool *leaf, uint32_t *where)
{
	int l = p->cur, depth = p->depth[w], k = 0, hop;
	uint32_t i = 0, n = d->nr;

	*leaf = false;
	*where = 0;
	if (!n)
		return false;
	if (is_lib_fn(p, l, d->ips[0], "leaf") || is_lib_fn(p, l, d->ips[0], "recurse") ||
	    is_lib_fn(p, l, d->ips[0], "run")) {
		*leaf = is_lib_fn(p, l, d->ips[0], "leaf");
		i = *leaf;
		for (; i < n && is_lib_fn(p, l, faddr(d, i), "recurse"); i++)
			k++;
		if (*leaf ? k != depth : k > depth)
			goto bad;
		if (i >= n || !is_lib_fn(p, l, faddr(d, i), "run"))
			goto bad;
		i++;
		hop = p->hops - 1;
	} else {
		/* a sample in hop_N: hop_N ... hop_0 */
		for (hop = p->hops - 1; hop >= 0 && !dc_sym_is(d->ips[0], hop_name(hop)); hop--)
			;
	}
	for (; hop >= 0; hop--, i++)
		if (i >= n || !dc_sym_is(faddr(d, i), hop_name(hop)))
			goto bad;
	if (i >= n || !dc_sym_is(faddr(d, i), "thread_main"))
		goto bad;
	i++;
	if (i >= n || d->ips[i] != c->ret[w] || !libc_local(faddr(d, i)))
		goto bad;	/* into start_thread */
	i++;
	if (i >= n || !libc_local(faddr(d, i)) || (ret2 && d->ips[i] != ret2))
		goto bad;	/* into clone3 */
	if (!ret2)
		ret2 = d->ips[i];
	i++;
	if (i != n)
		goto bad;
	return true;
bad:
	*where = i;
	return false;
}

static void print_rec(const struct phase *p, const struct dc_deferred *d)
{
	printf("#   record tid %u cookie %#llx, %u entries\n", d->tid,
	       (unsigned long long)d->cookie, d->nr);
	for (uint32_t i = 0, n; i < d->nr; i += n) {
		uint64_t a = faddr(d, i), off = 0;
		const char *name = NULL, *where = "";

		for (int l = 0; l < NR_LIBS && !name; l++)
			if (dc_dso_has(&p->dso[l], a)) {
				name = dc_dso_name(&p->dso[l], a, NULL, &off);
				where = l == LIBA ? " [liba]" : " [libb]";
				if (!name) {
					name = "?";
					off = a - p->dso[l].bias;
				}
			}
		if (!name) {
			name = dc_sym(a, &off);
			where = "";
		}
		if (!name && dc_dso_has(&libc_dso, a)) {
			where = " [libc]";
			name = dc_dso_name(&libc_dso, a, NULL, &off);
			if (!name) {
				name = "libc.so.6";
				off = a - libc_dso.bias;
			}
		}
		for (n = 1; i + n < d->nr && d->ips[i + n] == d->ips[i]; n++)
			;
		printf("#     %016llx %s+%#llx%s", (unsigned long long)d->ips[i],
		       name ? name : "?", (unsigned long long)(off + !!i), where);
		if (n > 1)
			printf(" (x%u)", n);
		printf("\n");
	}
}

static int worker_of(const struct child *c, uint32_t tid)
{
	for (int i = 0; i < c->nworkers; i++)
		if ((uint32_t)c->tid[i] == tid)
			return i;
	return -1;
}

/* The records of each phase, and the whole log's samples and records. */
static void analyze(struct child *c, size_t *exact, size_t *records, bool *leaf_ok)
{
	uint64_t user_max = DC_USER_MAX;
	struct dc_rec_key *keys = dc_rec_index(&c->log);
	int print_bad = 3;

	if (!keys)
		ksft_exit_fail_msg("out of memory\n");
	*exact = *records = 0;
	*leaf_ok = c->nph > 0;
	for (int k = 0; k < c->nph; k++) {
		struct phase *p = &c->ph[k];
		char seen[16][32];
		int nseen = 0;

		for (size_t r = p->rec_lo; r < p->rec_hi; r++) {
			struct dc_deferred *d = &c->log.deferred[r];
			int w = worker_of(c, d->tid);
			uint32_t where = 0;
			bool leaf = false, ok;

			p->nrec++;
			p->sum_nr += d->nr;
			/* the functions of the phase's library met: one FDE each */
			for (uint32_t i = 0; i < d->nr; i++) {
				const char *f = lib_fn(p, p->cur, faddr(d, i));
				int s;

				for (s = 0; f && s < nseen && strcmp(seen[s], f); s++)
					;
				if (f && s == nseen && nseen < 16)
					snprintf(seen[nseen++], sizeof(seen[0]), "%s", f);
			}
			ok = w >= 0 && rec_exact(c, p, d, w, &leaf, &where);
			p->exact += ok;
			if (ok && leaf)
				p->leaf[w]++;
			if (!ok && print_bad) {
				print_bad--;
				ksft_print_msg("%s phase %d: record not the chain (from entry %u):\n",
					       c->name, k, where);
				print_rec(p, d);
			}
		}
		p->lib_fns = nseen;
		for (size_t s = p->smp_lo; s < p->smp_hi; s++) {
			const struct dc_sample *sm = &c->log.samples[s];
			int w = worker_of(c, sm->tid);

			if (w < 0)
				continue;
			if (!p->t_lo[w] || sm->time < p->t_lo[w])
				p->t_lo[w] = sm->time;
			if (sm->time > p->t_hi[w])
				p->t_hi[w] = sm->time;
		}
		*exact += p->exact;
		*records += p->nrec;
		for (int w = 0; w < c->nworkers; w++)
			*leaf_ok = *leaf_ok && p->leaf[w] >= MIN_LEAF;
	}
	for (size_t i = 0; i < c->log.nr_samples; i++) {
		struct dc_sample *s = &c->log.samples[i];
		long idx, n;

		if (s->pid != (uint32_t)c->pid || worker_of(c, s->tid) < 0)
			c->bad_pid++;
		if (!s->ends_deferred && !s->cookie &&
		    (dc_kernel_stack_has(s, "do_exit") ||
		     dc_kernel_stack_has(s, "do_group_exit"))) {
			/*
			 * In the exit path nothing can be deferred: perf
			 * takes the user stack in place (the arch's
			 * frame-pointer walk, not the deferred one), or
			 * none once the mm is gone.
			 */
			if (c->no_cookie_exit++ < 2) {
				ksft_print_msg("%s: excused: sample %zu (tid %u) without a cookie, in the exit path (%s); its callchain:\n",
					       c->name, i, s->tid,
					       s->has_user_ctx ? "a user stack in place" : "no user stack");
				for (uint32_t k = 0; k < s->nr_kernel; k++)
					printf("#     %016llx %s\n", (unsigned long long)s->kernel[k],
					       dc_ksym(s->kernel[k]));
			}
			continue;
		}
		if (!s->ends_deferred || !s->cookie || s->has_user_ctx) {
			if (c->bad_ctx++ < 3) {
				ksft_print_msg("%s: sample %zu (tid %u) without a deferred user stack (%s, cookie %#llx%s):\n",
					       c->name, i, s->tid,
					       s->ends_deferred ? "deferred" : "not deferred",
					       (unsigned long long)s->cookie,
					       s->has_user_ctx ? ", a user stack in place" : "");
				for (uint32_t k = 0; k < s->nr_kernel; k++)
					printf("#     %016llx %s\n", (unsigned long long)s->kernel[k],
					       dc_ksym(s->kernel[k]));
			}
			continue;
		}
		c->cpus |= 1u << (dc_cookie_cpu(s->cookie) & 31);
		idx = dc_rec_find(keys, c->log.nr_deferred, s->cookie, s->pid, s->tid, &n);
		if (idx >= 0) {
			c->log.deferred[idx].matched++;
			c->dup += n > 1;
			continue;
		}
		/*
		 * Its thread's last entry, in the signal path but not the
		 * exit path (the final stop)?  Not the exit path: the
		 * upstream exit loss has no excuse here (see the top).
		 */
		{
			uint64_t last_t = 0, last_c = 0;
			bool stopping = (dc_kernel_stack_has(s, "get_signal") ||
					 dc_kernel_stack_has(s, "arch_do_signal_or_restart")) &&
					!dc_kernel_stack_has(s, "do_exit") &&
					!dc_kernel_stack_has(s, "do_group_exit");

			for (size_t j = 0; j < c->log.nr_samples; j++) {
				const struct dc_sample *t = &c->log.samples[j];

				if (t->tid == s->tid && t->time >= last_t) {
					last_t = t->time;
					last_c = t->cookie;
				}
			}
			if (s->cookie == last_c && stopping) {
				c->excused++;
				ksft_print_msg("%s: excused: the last sample of tid %u (cookie %#llx) has no record; its kernel stack:\n",
					       c->name, s->tid, (unsigned long long)s->cookie);
				for (uint32_t k = 0; k < s->nr_kernel; k++)
					printf("#     %016llx %s\n", (unsigned long long)s->kernel[k],
					       dc_ksym(s->kernel[k]));
				continue;
			}
		}
		if (c->missing++ < 3) {
			ksft_print_msg("%s: sample %zu (tid %u, cookie %#llx) has no record; kernel stack:\n",
				       c->name, i, s->tid, (unsigned long long)s->cookie);
			for (uint32_t k = 0; k < s->nr_kernel; k++)
				printf("#     %016llx %s\n", (unsigned long long)s->kernel[k],
				       dc_ksym(s->kernel[k]));
		}
	}
	for (size_t i = 0; i < c->log.nr_deferred; i++) {
		const struct dc_deferred *d = &c->log.deferred[i];
		bool k = false, nu = false;

		c->orphan += !d->matched;
		c->bad_rec += d->misc != PERF_RECORD_MISC_USER || !d->nr;
		for (uint32_t j = 0; j < d->nr; j++) {
			k = k || d->ips[j] >= KERNEL_MIN;
			nu = nu || (d->ips[j] >= user_max && d->ips[j] < KERNEL_MIN);
		}
		c->kaddr += k;
		c->nonuser += nu;
	}
	free(keys);
}

/* The invariants of the whole log, and the chains: one result's worth. */
static bool chains_ok(struct child *c, char *buf, size_t len)
{
	size_t exact, records;
	bool leaf_ok, inv;
	size_t n = 0;

	analyze(c, &exact, &records, &leaf_ok);
	inv = !c->broken && c->log.nr_samples > 0 && !c->bad_pid && !c->bad_ctx &&
	      !c->missing && !c->dup && !c->orphan && !c->bad_rec && !c->kaddr &&
	      !c->nonuser && !c->log.lost && !c->log.malformed;
	n += snprintf(buf + n, len - n, "%zu of %zu records exact; leaf records per phase and worker",
		      exact, records);
	for (int k = 0; k < c->nph; k++)
		for (int w = 0; w < c->nworkers && n < len; w++)
			n += snprintf(buf + n, len - n, "%s%zu", w ? "/" : " ", c->ph[k].leaf[w]);
	if (n < len)
		snprintf(buf + n, len - n,
			 " (>= %d); %zu samples: %zu of another task, %zu without a deferred user stack (+%zu excused: in the exit path, no cookie), %zu without a record (+%zu excused), %zu twice, %zu records without a sample, %zu bad, %zu with a kernel or non-user address, %llu lost, %llu malformed%s%s",
			 MIN_LEAF, c->log.nr_samples, c->bad_pid, c->bad_ctx, c->no_cookie_exit,
			 c->missing, c->excused, c->dup, c->orphan,
			 c->bad_rec, c->kaddr + c->nonuser, (unsigned long long)c->log.lost,
			 (unsigned long long)c->log.malformed, c->broken ? "; BROKEN: " : "",
			 c->broken ? c->why : "");
	return inv && leaf_ok && records > 0 && exact == records;
}

/*
 * Where phase @k's samples were: how many, how many kernel entries
 * (cookies), and the kernel functions most of them were in.
 */
static void sample_profile(const struct child *c, int k)
{
	const struct phase *p = &c->ph[k];
	struct { const char *name; size_t n; } top[64];
	size_t ntop = 0, cookies = 0, user = 0;
	char buf[512];
	size_t n = 0;

	for (size_t i = p->smp_lo; i < p->smp_hi; i++) {
		const struct dc_sample *s = &c->log.samples[i];

		cookies += i == p->smp_lo || s->cookie != c->log.samples[i - 1].cookie;
		user += !s->nr_kernel;
		for (uint32_t j = 0; j < s->nr_kernel; j++) {
			const char *f = dc_ksym(s->kernel[j]);
			size_t t;
			bool dup = false;

			for (uint32_t m = 0; m < j && !dup; m++)
				dup = dc_ksym(s->kernel[m]) == f;
			if (dup)
				continue;
			for (t = 0; t < ntop && top[t].name != f; t++)
				;
			if (t == ntop && ntop < 64)
				top[ntop++] = (typeof(top[0])){ f, 0 };
			if (t < ntop)
				top[t].n++;
		}
	}
	for (int r = 0; r < 8; r++) {
		size_t best = ntop;

		for (size_t t = 0; t < ntop; t++)
			if (top[t].n && (best == ntop || top[t].n > top[best].n))
				best = t;
		if (best == ntop)
			break;
		n += snprintf(buf + n, sizeof(buf) - n, " %s %zu", top[best].name, top[best].n);
		top[best].n = 0;
		if (n >= sizeof(buf))
			break;
	}
	ksft_print_msg("SAMPLES %s phase %d: %zu samples (%zu in user mode), %zu runs of one cookie; kernel functions in most:%s\n",
		       c->name, k, p->smp_hi - p->smp_lo, user, cookies, buf);
}

/* Print phase @k's figures; do the counters account for its records? */
static bool phase_accounted(const struct child *c, int k)
{
	const struct phase *p = &c->ph[k];
	int64_t walks = delta(c, k, "walks"), hits = delta(c, k, "row_hits");
	int64_t misses = delta(c, k, "row_misses"), tf = delta(c, k, "table_frames");
	int64_t eos = delta(c, k, "end_of_stack");
	int64_t other[] = {
		delta(c, k, "fp_frames"), delta(c, k, "no_tables"), delta(c, k, "no_object"),
		delta(c, k, "no_eh_frame"), delta(c, k, "budget_exhausted"),
		delta(c, k, "fp_unknown"), delta(c, k, "lookups_capped"), refused(c, k)
	};
	bool ok;

	sample_profile(c, k);
	ok = walks == (int64_t)p->nrec && hits + misses == (int64_t)p->sum_nr &&
		  tf == (int64_t)(p->sum_nr - p->nrec) && eos == (int64_t)p->nrec;

	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		ok = ok && other[i] == 0;
	ksft_print_msg("FIGURES %s phase %d (%s): %zu records, %zu entries, %zu exact; walks %+lld, row_hits %+lld, row_misses %+lld, lookups %+lld, evictions %+lld, revalidations %+lld, table_frames %+lld, end_of_stack %+lld; fp_frames %+lld, no_tables %+lld, no_object %+lld, no_eh_frame %+lld, budget_exhausted %+lld, fp_unknown %+lld, lookups_capped %+lld, refused_* %+lld; cache_bytes %llu; %s functions met: %zu%s\n",
		       c->name, k, op_name[p->op], p->nrec, p->sum_nr, p->exact,
		       (long long)walks, (long long)hits, (long long)misses,
		       (long long)delta(c, k, "lookups"), (long long)delta(c, k, "evictions"),
		       (long long)delta(c, k, "revalidations"), (long long)tf, (long long)eos,
		       (long long)other[0], (long long)other[1], (long long)other[2],
		       (long long)other[3], (long long)other[4], (long long)other[5],
		       (long long)other[6], (long long)other[7],
		       (unsigned long long)stat_of(&p->st, "cache_bytes"), lib_file[p->cur],
		       p->lib_fns, ok ? "" : " -- NOT ACCOUNTED");
	return ok;
}

static void result_accounting(const struct child *c, const char *what)
{
	bool ok = c->nph > 0 && !c->broken;

	for (int k = 0; k < c->nph; k++)
		ok = phase_accounted(c, k) && ok;
	ksft_test_result(ok,
			 "%s: in each of %d phases the counters account for every record: walks = records, row_hits + row_misses = entries, table_frames = entries - records, end_of_stack = records, no frame-pointer frame, refusal, missing object or tables, budget or lookup cap\n",
			 what, c->nph);
}

/*
 * Phase @k dropped the rows of the object it replaced and kept the
 * others: row_misses = the library's functions met, one lookup, and
 * revalidations grew.
 */
static bool dropped(const struct child *c, int k)
{
	const struct phase *p = &c->ph[k];

	return k < c->nph && p->lib_fns > 0 && delta(c, k, "row_misses") == (int64_t)p->lib_fns &&
	       delta(c, k, "lookups") == 1 && delta(c, k, "revalidations") >= 1;
}

/* Phase @k kept every row: no miss, no lookup, every lookup a hit. */
static bool kept(const struct child *c, int k)
{
	const struct phase *p = &c->ph[k];

	return k < c->nph && p->sum_nr > 0 && delta(c, k, "row_misses") == 0 &&
	       delta(c, k, "lookups") == 0 && delta(c, k, "row_hits") == (int64_t)p->sum_nr;
}

static void free_child(struct child *c)
{
	for (int k = 0; k < c->nph; k++)
		for (int l = 0; l < NR_LIBS; l++)
			dc_dso_free(&c->ph[k].dso[l]);
	dc_log_free(&c->log);
}

/* ------- sysctls kernel.unwind_user_tables_max_kb and _shared ------- */

static long max_kb_orig = -1, shared_orig = -1;
static pid_t max_kb_owner;

static long sysctl_get(const char *path)
{
	char buf[32] = "";
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? strtol(buf, NULL, 10) : -1;
}

static bool sysctl_set(const char *path, long v)
{
	char buf[32];
	int fd = open(path, O_WRONLY), n;
	bool ok;

	if (fd < 0)
		return false;
	n = snprintf(buf, sizeof(buf), "%ld\n", v);
	ok = write(fd, buf, n) == n;
	close(fd);
	return ok && sysctl_get(path) == v;
}

static long max_kb_get(void)
{
	return sysctl_get(MAX_KB_SYSCTL);
}

static bool max_kb_set(long kb)
{
	return sysctl_set(MAX_KB_SYSCTL, kb);
}

static void max_kb_restore(void)
{
	if (max_kb_orig >= 0 && getpid() == max_kb_owner && max_kb_get() != max_kb_orig)
		max_kb_set(max_kb_orig);
}

/* At exit: both sysctls as they were. */
static void sysctls_restore(void)
{
	max_kb_restore();
	if (shared_orig >= 0 && getpid() == max_kb_owner &&
	    sysctl_get(SHARED_SYSCTL) != shared_orig)
		sysctl_set(SHARED_SYSCTL, shared_orig);
}

/* ---------------- the cases ---------------- */

#define NR_RESULTS	29

static struct child children[10];
static int nchildren;

static void case_warm(void)
{
	struct child *c = &children[nchildren++];
	const int d[MAX_WORKERS] = { 40 };
	char buf[1024];
	bool ok;

	if (child_start(c, "warm", 1)) {
		child_phase(c, OP_LOAD, LIBA, d);
		child_phase(c, OP_FORK, LIBA, d);
	}
	child_end(c, END_EXIT);
	ok = chains_ok(c, buf, sizeof(buf));
	ksft_test_result(ok, "warm: the same workload twice in one process: %s\n", buf);
	ksft_test_result(c->nph == 2 && delta(c, 0, "row_misses") > 0 && kept(c, 1),
			 "warm: first run row_misses %+lld (> 0); a grandchild forked and gone, then the second run: row_misses %+lld, lookups %+lld, row_hits %+lld = its %zu entries\n",
			 (long long)delta(c, 0, "row_misses"), (long long)delta(c, 1, "row_misses"),
			 (long long)delta(c, 1, "lookups"), (long long)delta(c, 1, "row_hits"),
			 c->ph[1].sum_nr);
	result_accounting(c, "warm");
}

static void case_swap(void)
{
	struct child *c = &children[nchildren++];
	const int d0[MAX_WORKERS] = { 30 }, d1[MAX_WORKERS] = { 45 }, d2[MAX_WORKERS] = { 25 };
	char buf[1024];
	bool ok, same;

	if (child_start(c, "dlclose+dlopen", 1)) {
		child_phase(c, OP_LOAD, LIBA, d0);
		child_phase(c, OP_SWAP, LIBB, d1);
		child_phase(c, OP_OVER, LIBA, d2);
	}
	child_end(c, END_KILL);
	ok = chains_ok(c, buf, sizeof(buf));
	ksft_test_result(ok && c->nph == 3 && c->ph[1].cur == LIBB && c->ph[2].cur == LIBA,
			 "dlclose+dlopen: liba, then libb, then liba again at one address, every record the chain of the library mapped then: %s\n",
			 buf);
	same = c->nph == 3 && c->ph[0].base && c->ph[0].base == c->ph[1].base &&
	       c->ph[1].base == c->ph[2].base;
	ksft_test_result(same && dropped(c, 1) && dropped(c, 2),
			 "dlclose+dlopen: one address (%#llx, %#llx, %#llx; libb %s); the replaced object's rows dropped: libb row_misses %+lld = its %zu functions met, lookups %+lld, revalidations %+lld; liba over it row_misses %+lld = %zu, lookups %+lld, revalidations %+lld\n",
			 (unsigned long long)c->ph[0].base,
			 (unsigned long long)(c->nph > 1 ? c->ph[1].base : 0),
			 (unsigned long long)(c->nph > 2 ? c->ph[2].base : 0),
			 c->nph > 1 && strstr(c->ph[1].msg, "NOT REUSED") ? "mapped there by hand" :
			 "put there by the loader",
			 (long long)delta(c, 1, "row_misses"), c->ph[1].lib_fns,
			 (long long)delta(c, 1, "lookups"), (long long)delta(c, 1, "revalidations"),
			 (long long)delta(c, 2, "row_misses"), c->ph[2].lib_fns,
			 (long long)delta(c, 2, "lookups"), (long long)delta(c, 2, "revalidations"));
	result_accounting(c, "dlclose+dlopen");
}

static void case_mappings(void)
{
	struct child *c = &children[nchildren++];
	const int d[MAX_WORKERS] = { 35 };
	char buf[1024];
	bool ok;

	if (child_start(c, "mappings", 1)) {
		child_phase(c, OP_LOAD, LIBA, d);
		child_phase(c, OP_MPROTECT, LIBA, d);
		child_phase(c, OP_REMAP, LIBA, d);
		child_phase(c, OP_MREMAP, LIBA, d);
	}
	child_end(c, END_EXEC);
	ok = chains_ok(c, buf, sizeof(buf));
	ksft_test_result(ok && c->nph == 4,
			 "mprotect, munmap+remap, mremap of liba between runs: %s\n", buf);
	ksft_test_result(c->nph > 1 && kept(c, 1) && delta(c, 1, "revalidations") >= 1,
			 "mprotect rwx then r-x (one VMA, same range, file, offset): rows kept: row_misses %+lld, lookups %+lld, row_hits %+lld = its %zu entries, revalidations %+lld (>= 1)\n",
			 (long long)delta(c, 1, "row_misses"), (long long)delta(c, 1, "lookups"),
			 (long long)delta(c, 1, "row_hits"), c->ph[1].sum_nr,
			 (long long)delta(c, 1, "revalidations"));
	ksft_test_result(c->nph > 2 && c->ph[2].base == c->ph[1].base && dropped(c, 2),
			 "munmap + remap from a new open() at the same place: rows dropped: row_misses %+lld = liba's %zu functions met, lookups %+lld, revalidations %+lld\n",
			 (long long)delta(c, 2, "row_misses"), c->ph[2].lib_fns,
			 (long long)delta(c, 2, "lookups"), (long long)delta(c, 2, "revalidations"));
	ksft_test_result(c->nph > 3 && c->ph[3].base != c->ph[2].base && dropped(c, 3),
			 "mremap of every VMA of liba from %#llx to %#llx: rows dropped, compiled again at the new place: row_misses %+lld = its %zu functions met, lookups %+lld, revalidations %+lld\n",
			 (unsigned long long)(c->nph > 2 ? c->ph[2].base : 0),
			 (unsigned long long)(c->nph > 3 ? c->ph[3].base : 0),
			 (long long)delta(c, 3, "row_misses"), c->ph[3].lib_fns,
			 (long long)delta(c, 3, "lookups"), (long long)delta(c, 3, "revalidations"));
	result_accounting(c, "mappings");
}

static void case_threads(void)
{
	struct child *c = &children[nchildren++];
	const int d[MAX_WORKERS] = { 12, 19, 26, 33 };
	char buf[1024];
	bool ok, overlap = true;
	int churned = 0;
	int cpus[8], ncpus = dc_online_cpus(cpus, 8);

	if (child_start(c, "threads", MAX_WORKERS)) {
		child_phase(c, OP_LOAD, LIBA, d);
		child_phase(c, OP_RUN, LIBA, d);
		child_phase(c, OP_CHURN, LIBA, d);
		churned = ctl->churn;
	}
	child_end(c, END_EXIT);
	ok = chains_ok(c, buf, sizeof(buf));
	for (int k = 0; k < c->nph; k++) {
		const struct phase *p = &c->ph[k];
		uint64_t lo = 0, hi = UINT64_MAX;

		for (int w = 0; w < c->nworkers; w++) {
			ksft_print_msg("threads phase %d: tid %d depth %d: samples from %llu to %llu ns\n",
				       k, c->tid[w], p->depth[w], (unsigned long long)p->t_lo[w],
				       (unsigned long long)p->t_hi[w]);
			lo = p->t_lo[w] > lo ? p->t_lo[w] : lo;
			hi = p->t_hi[w] < hi ? p->t_hi[w] : hi;
		}
		overlap = overlap && lo < hi;
	}
	ksft_test_result(ok && overlap && c->nph == 3,
			 "threads: 4 threads of one process at depths 12, 19, 26, 33 at once (their sample times overlap: %s; CPUs seen in cookies %#x, %d online): %s\n",
			 overlap ? "yes" : "no", c->cpus, ncpus, buf);
	ksft_test_result(c->nph == 3 && delta(c, 0, "row_misses") > 0 && kept(c, 1) &&
			 phase_accounted(c, 0) && phase_accounted(c, 1),
			 "threads: the counters account for every record of the first two runs; first run row_misses %+lld, second run row_misses %+lld, lookups %+lld, row_hits %+lld = its %zu entries\n",
			 (long long)delta(c, 0, "row_misses"), (long long)delta(c, 1, "row_misses"),
			 (long long)delta(c, 1, "lookups"), (long long)delta(c, 1, "row_hits"),
			 c->ph[1].sum_nr);
	ksft_test_result(c->nph == 3 && churned > 0 && kept(c, 2) &&
			 delta(c, 2, "revalidations") > 0 && phase_accounted(c, 2),
			 "threads, third run while the helper changes the mappings (%d rounds: liba's code rwx and back, libb unmapped and mapped again): walks revalidated %+lld times, liba's rows kept: row_misses %+lld, lookups %+lld, row_hits %+lld = its %zu entries, every record exact and accounted for\n",
			 churned, (long long)delta(c, 2, "revalidations"),
			 (long long)delta(c, 2, "row_misses"), (long long)delta(c, 2, "lookups"),
			 (long long)delta(c, 2, "row_hits"), c->ph[2].sum_nr);
}

static void case_cap(void)
{
	struct child *c = &children[nchildren++];
	const int d[MAX_WORKERS] = { 40 };
	uint64_t bound = 3 * CAP_KB * 1024 + CAP_SLACK, over[2] = { 0, 0 };
	char buf[1024];
	bool ok, capped = false;

	if (!max_kb_set(CAP_KB)) {
		c->name = "cap";
		broken(c, "cannot set %s to %d", MAX_KB_SYSCTL, CAP_KB);
	} else if (child_start(c, "cap", 1)) {
		capped = true;
		phase_ms = CAP_PHASE_MS;
		child_phase_hops(c, OP_LOAD, LIBA, d, NR_HOPS);
		child_phase_hops(c, OP_RUN, LIBA, d, NR_HOPS);
		phase_ms = PHASE_MS;
		for (int k = 0; k < c->nph; k++)
			over[k] = stat_of(&c->ph[k].st, "cache_bytes") - c->bytes_before;
		if (!max_kb_set(max_kb_orig))
			broken(c, "cannot put %s back to %ld", MAX_KB_SYSCTL, max_kb_orig);
		child_phase_hops(c, OP_RUN, LIBA, d, NR_HOPS);
		child_phase_hops(c, OP_RUN, LIBA, d, NR_HOPS);
	}
	max_kb_restore();
	child_end(c, END_KILL);
	ok = chains_ok(c, buf, sizeof(buf));
	ksft_test_result(capped && ok && c->nph == 4 && delta(c, 0, "evictions") > 0 &&
			 delta(c, 1, "evictions") > 0,
			 "cap %d KiB: evictions %+lld, %+lld in two runs, every record exact: %s\n",
			 CAP_KB, (long long)delta(c, 0, "evictions"),
			 (long long)delta(c, 1, "evictions"), buf);
	ksft_test_result(capped && c->nph == 4 && (int64_t)over[0] >= 0 && over[0] <= bound &&
			 (int64_t)over[1] >= 0 && over[1] <= bound &&
			 delta(c, 2, "evictions") == 0 && delta(c, 3, "evictions") == 0 && kept(c, 3),
			 "cap %d KiB: cache_bytes above its value before the child %lld, %lld (<= %llu) at the capped stops; cap put back to %ld KiB: evictions %+lld, %+lld, then row_misses %+lld, lookups %+lld\n",
			 CAP_KB, (long long)over[0], (long long)over[1], (unsigned long long)bound,
			 max_kb_orig, (long long)delta(c, 2, "evictions"),
			 (long long)delta(c, 3, "evictions"), (long long)delta(c, 3, "row_misses"),
			 (long long)delta(c, 3, "lookups"));
	result_accounting(c, "cap");
}

/* vm.drop_caches = 2: reclaim every slab cache it can (drop_slab()). */
static bool drop_slab(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	bool ok = fd >= 0 && write(fd, "2\n", 2) == 2;

	if (!ok)
		ksft_print_msg("vm.drop_caches: %s\n", strerror(errno));
	if (fd >= 0)
		close(fd);
	return ok;
}

static void case_shrink(void)
{
	struct child *c = &children[nchildren++];
	const int d[MAX_WORKERS] = { 40 };
	uint64_t held = UINT64_MAX, left = UINT64_MAX, shrunk = 0;
	int64_t other[2] = { -1, -1 }, lookups[2] = { -1, -1 };
	struct dc_stats s0, s1;
	bool dropped_all = false, again;
	char buf[1024];

	if (child_start(c, "shrink", 1) && child_phase(c, OP_LOAD, LIBA, d)) {
		if (dc_stats_read(&s0) && drop_slab() && dc_stats_read(&s1)) {
			/* and rows compiled from files by earlier tests' processes */
			held = stat_of(&s0, "cache_bytes") + stat_of(&s0, "file_bytes");
			left = stat_of(&s1, "cache_bytes") + stat_of(&s1, "file_bytes");
			shrunk = stat_of(&s1, "shrunk") - stat_of(&s0, "shrunk");
			dropped_all = held != UINT64_MAX && held > 0 && left == 0 &&
				      shrunk == held;
		}
		child_phase(c, OP_RUN, LIBA, d);
	}
	child_end(c, END_EXIT);
	ksft_test_result(chains_ok(c, buf, sizeof(buf)),
			 "shrink: a run, reclaim, the same run again: %s\n", buf);
	ksft_test_result(dropped_all,
			 "shrink: vm.drop_caches = 2 with the child stopped: cache_bytes + file_bytes %llu -> %llu (0), shrunk +%llu (= what they held)\n",
			 (unsigned long long)held, (unsigned long long)left,
			 (unsigned long long)shrunk);
	for (int k = 0; k < 2 && k < c->nph; k++) {
		other[k] = delta(c, k, "row_misses") - (int64_t)c->ph[k].lib_fns;
		lookups[k] = delta(c, k, "lookups");
	}
	again = c->nph == 2 && c->ph[0].lib_fns > 0 && c->ph[1].lib_fns > 0 &&
		other[0] > 0 && other[1] == other[0] && lookups[0] > 0 &&
		lookups[1] == lookups[0];
	ksft_test_result(again,
			 "shrink: the run after compiles again what the first compiled: row_misses beyond the library's functions met %lld (first run %lld), lookups %lld (first run %lld); library functions met %zu, %zu\n",
			 (long long)other[1], (long long)other[0], (long long)lookups[1],
			 (long long)lookups[0], c->nph > 0 ? c->ph[0].lib_fns : 0,
			 c->nph > 1 ? c->ph[1].lib_fns : 0);
	result_accounting(c, "shrink");
}

static void case_exit(uint64_t baseline)
{
	uint64_t now = cache_bytes_now();
	bool ok = nchildren == 6 && now != UINT64_MAX && now <= baseline;
	char buf[1024];
	size_t n = 0;

	for (int i = 0; i < nchildren; i++) {
		struct child *c = &children[i];
		bool one = c->bytes_before != UINT64_MAX && c->bytes_alive > c->bytes_before &&
			   c->bytes_after <= c->bytes_before &&
			   (strcmp(c->end, "execve()") || c->bytes_exec <= c->bytes_before);

		ok = ok && one;
		if (n < sizeof(buf))
			n += snprintf(buf + n, sizeof(buf) - n,
				      "%s%s (%s) %llu -> %llu -> %llu%s", i ? "; " : "", c->name,
				      c->end, (unsigned long long)c->bytes_before,
				      (unsigned long long)c->bytes_alive,
				      (unsigned long long)c->bytes_after, one ? "" : " BAD");
	}
	ksft_test_result(ok,
			 "exit frees: cache_bytes before each child -> at its last stop (higher) -> once it is gone (<= before, bound 0: nothing else is sampled): %s; at the start %llu, now %llu\n",
			 buf, (unsigned long long)baseline, (unsigned long long)now);
}

/*
 * Rows compiled from files, shared by every mm: after reclaim has dropped
 * every file's rows no mm uses, child A's walks compile the rows of its
 * three objects (liba, this program, libc: one lookup each) into new
 * entries; then child B, a new process of the same program and library
 * (A gone), finds each object's entry and compiles nothing.
 */
static void case_shared(void)
{
	struct child *a = &children[nchildren++], *b = &children[nchildren++];
	const int d[MAX_WORKERS] = { 40 };
	struct dc_stats s0;
	int64_t left = -1;
	char buf[1024];
	bool on, ok, found;

	on = sysctl_set(SHARED_SYSCTL, 1);
	if (on && drop_slab() && dc_stats_read(&s0))
		left = (int64_t)stat_of(&s0, "files_cached");
	if (child_start(a, "shared A", 1))
		child_phase(a, OP_LOAD, LIBA, d);
	child_end(a, END_EXIT);
	if (child_start(b, "shared B", 1))
		child_phase(b, OP_LOAD, LIBA, d);
	child_end(b, END_EXIT);
	ok = chains_ok(a, buf, sizeof(buf));
	ksft_test_result(ok, "shared: %s = 1, a process: %s\n", SHARED_SYSCTL, buf);
	ok = chains_ok(b, buf, sizeof(buf));
	ksft_test_result(ok, "shared: then another process of the same program: %s\n", buf);
	ok = on && left == 0 && a->nph == 1 && delta(a, 0, "row_misses") > 0 &&
	     delta(a, 0, "lookups") == 3 && delta(a, 0, "files_cached") == 3 &&
	     delta(a, 0, "files_found") == 0;
	ksft_test_result(ok,
			 "shared: after reclaim (files_cached %lld, 0), the first process compiles: row_misses %+lld (> 0), lookups %+lld (3: liba, the program, libc), files_cached %+lld (3), files_found %+lld (0)\n",
			 (long long)left, (long long)(a->nph ? delta(a, 0, "row_misses") : -1),
			 (long long)(a->nph ? delta(a, 0, "lookups") : -1),
			 (long long)(a->nph ? delta(a, 0, "files_cached") : -1),
			 (long long)(a->nph ? delta(a, 0, "files_found") : -1));
	found = on && b->nph == 1 && delta(b, 0, "row_misses") == 0 &&
		delta(b, 0, "lookups") == 3 && delta(b, 0, "files_found") == 3 &&
		delta(b, 0, "files_cached") == 0 &&
		delta(b, 0, "row_hits") == (int64_t)b->ph[0].sum_nr;
	ksft_test_result(found,
			 "shared: the second process (the first gone) compiles nothing: row_misses %+lld (0), lookups %+lld = files_found %+lld (3), files_cached %+lld (0), row_hits %+lld = its %zu entries\n",
			 (long long)(b->nph ? delta(b, 0, "row_misses") : -1),
			 (long long)(b->nph ? delta(b, 0, "lookups") : -1),
			 (long long)(b->nph ? delta(b, 0, "files_found") : -1),
			 (long long)(b->nph ? delta(b, 0, "files_cached") : -1),
			 (long long)(b->nph ? delta(b, 0, "row_hits") : -1),
			 b->nph ? b->ph[0].sum_nr : 0);
	if (!sysctl_set(SHARED_SYSCTL, 0))
		ksft_print_msg("cannot switch %s off again\n", SHARED_SYSCTL);
}

/* Write library @l's file to @path (O_TRUNC: in place if it exists). */
static bool lib_write(int l, const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	bool ok = fd >= 0 && write(fd, libs[l].syms.img, libs[l].size) == (ssize_t)libs[l].size;

	if (!ok)
		ksft_print_msg("%s: %s\n", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	return ok;
}

/*
 * A file rewritten in place has new contents under the same inode: its
 * rows must not be found for it.  Child C dlopen()s a copy of liba and
 * compiles liba's rows from it (the program's and libc's are case 8's:
 * found); the copy is then rewritten in place with libb's bytes (a new
 * change time), and child D dlopen()s the same path: libb's code, whose
 * rows it must compile (row_misses = its functions met), its chains
 * exactly libb's.
 */
static void case_rewrite(void)
{
	struct child *c = &children[nchildren++], *d = &children[nchildren++];
	const int depth[MAX_WORKERS] = { 30 };
	char path[512], saved[NR_LIBS][512], buf[1024];
	bool on, ok, ramfs, unmounted;
	struct stat st0 = {}, st1 = {};

	/*
	 * On a ramfs: its page cache is read by read_mapping_folio(), as a
	 * disk filesystem's (the other files here are on the initramfs's
	 * tmpfs, read by shmem_read_folio()).  Unmounted at the end: the
	 * registry holds no reference to the file.
	 */
	mkdir(RAMFS_DIR, 0755);
	ramfs = !mount("none", RAMFS_DIR, "ramfs", 0, NULL);
	if (!ramfs)
		ksft_print_msg("mount -t ramfs %s: %s\n", RAMFS_DIR, strerror(errno));
	snprintf(path, sizeof(path), "%s/libcopy.so", RAMFS_DIR);
	for (int l = 0; l < NR_LIBS; l++) {
		memcpy(saved[l], libs[l].path, sizeof(saved[l]));
		snprintf(libs[l].path, sizeof(libs[l].path), "%s", path);
	}
	on = ramfs && sysctl_set(SHARED_SYSCTL, 1) && lib_write(LIBA, path) &&
	     !stat(path, &st0);
	if (on && child_start(c, "rewrite C", 1))
		child_phase(c, OP_LOAD, LIBA, depth);
	child_end(c, END_EXIT);
	on = on && lib_write(LIBB, path) && !stat(path, &st1);
	if (on && child_start(d, "rewrite D", 1))
		child_phase(d, OP_LOAD, LIBB, depth);
	child_end(d, END_EXIT);
	unlink(path);
	unmounted = ramfs && !umount(RAMFS_DIR);
	if (ramfs && !unmounted)
		ksft_print_msg("umount %s: %s\n", RAMFS_DIR, strerror(errno));
	for (int l = 0; l < NR_LIBS; l++)
		memcpy(libs[l].path, saved[l], sizeof(saved[l]));
	ok = on && chains_ok(c, buf, sizeof(buf));
	ksft_test_result(ok, "rewrite: liba's bytes in a new file: %s\n", buf);
	ok = on && chains_ok(d, buf, sizeof(buf));
	ksft_test_result(ok, "rewrite: the file rewritten in place with libb's bytes: %s\n", buf);
	ok = on && unmounted && st0.st_ino == st1.st_ino && c->nph == 1 && d->nph == 1 &&
	     c->ph[0].lib_fns > 0 && delta(c, 0, "row_misses") == (int64_t)c->ph[0].lib_fns &&
	     delta(c, 0, "files_found") == 2 && delta(c, 0, "files_cached") == 1 &&
	     d->ph[0].lib_fns > 0 && delta(d, 0, "row_misses") == (int64_t)d->ph[0].lib_fns &&
	     delta(d, 0, "files_found") == 2 && delta(d, 0, "files_cached") == 1;
	ksft_test_result(ok,
			 "rewrite: on a ramfs, one inode (%s), its rows compiled again after the rewrite: first row_misses %+lld = liba's %zu functions met, files_found %+lld (2), files_cached %+lld (1); after it row_misses %+lld = libb's %zu functions met, files_found %+lld (2), files_cached %+lld (1); the ramfs unmounted (%s: no reference held)\n",
			 st0.st_ino == st1.st_ino ? "yes" : "no",
			 (long long)(c->nph ? delta(c, 0, "row_misses") : -1),
			 c->nph ? c->ph[0].lib_fns : 0,
			 (long long)(c->nph ? delta(c, 0, "files_found") : -1),
			 (long long)(c->nph ? delta(c, 0, "files_cached") : -1),
			 (long long)(d->nph ? delta(d, 0, "row_misses") : -1),
			 d->nph ? d->ph[0].lib_fns : 0,
			 (long long)(d->nph ? delta(d, 0, "files_found") : -1),
			 (long long)(d->nph ? delta(d, 0, "files_cached") : -1),
			 unmounted ? "yes" : "no");
	if (!sysctl_set(SHARED_SYSCTL, 0))
		ksft_print_msg("cannot switch %s off again\n", SHARED_SYSCTL);
}

/*
 * --dry-run: every step of the cases' children without perf events or
 * counters (for a kernel without defer_callchain): the helper's message,
 * where each library is, and that the workers ran, for each step.
 */
static int dry(int argc, char **argv)
{
	const int d[MAX_WORKERS] = { 5, 6, 7, 8 };
	static const int ops[10][2] = {
		{ OP_LOAD, LIBA }, { OP_FORK, LIBA }, { OP_SWAP, LIBB }, { OP_OVER, LIBA },
		{ OP_RUN, LIBA },
		{ OP_LOAD, LIBA }, { OP_MPROTECT, LIBA }, { OP_REMAP, LIBA }, { OP_MREMAP, LIBA },
		{ OP_CHURN, LIBA },
	};
	struct child *c = &children[0];
	bool ok = true;

	(void)argc;
	(void)argv;
	for (int round = 0; round < 2; round++) {
		/* the child has MAX_PHASES phases at most */
		if (!child_start(c, "dry", round ? MAX_WORKERS : 1))
			return 1;
		for (size_t i = round * 5; i < round * 5 + 5; i++) {
			ok = child_phase_hops(c, ops[i][0], ops[i][1], d, i & 1 ? NR_HOPS : 0) && ok;
			if (c->nph)
				printf("# step %zu: %s at %#llx (maps: liba %d, libb %d mappings)\n", i,
				       lib_file[c->ph[c->nph - 1].cur],
				       (unsigned long long)c->ph[c->nph - 1].base,
				       c->ph[c->nph - 1].dso[LIBA].nmaps,
				       c->ph[c->nph - 1].dso[LIBB].nmaps);
		}
		child_end(c, round ? END_EXEC : END_EXIT);
		ok = ok && !c->broken;
		free_child(c);
	}
	printf("# dry run %s\n", ok ? "ok" : "FAILED");
	return !ok;
}

static void lib_init(int l, const char *dir)
{
	struct lib *L = &libs[l];
	const ElfW(Ehdr) *eh;
	const ElfW(Phdr) *ph;
	uint64_t pg = page_size(), first, last = 0;
	struct stat st;
	char name[16];
	int fd;

	snprintf(L->path, sizeof(L->path), "%s/%s", dir, lib_file[l]);
	/*
	 * Read, not mapped: the children must have no mapping of the file
	 * but the ones the cases make.
	 */
	fd = open(L->path, O_RDONLY);
	if (fd < 0 || fstat(fd, &st))
		ksft_exit_fail_msg("%s: %s\n", L->path, strerror(errno));
	L->size = st.st_size;
	L->syms.img = malloc(st.st_size);
	if (!L->syms.img || read(fd, L->syms.img, st.st_size) != st.st_size)
		ksft_exit_fail_msg("%s: %s\n", L->path, strerror(errno));
	close(fd);
	if (dc_dso_load(&L->syms, L->syms.img, st.st_size, 0))
		ksft_exit_fail_msg("%s: no symbols\n", L->path);
	eh = L->syms.img;
	ph = (const void *)((const char *)L->syms.img + eh->e_phoff);
	for (int i = 0; i < eh->e_phnum && L->nload < 8; i++)
		if (ph[i].p_type == PT_LOAD)
			L->load[L->nload++] = ph[i];
	if (!L->nload)
		ksft_exit_fail_msg("%s: no PT_LOAD\n", L->path);
	first = L->load[0].p_vaddr & ~(pg - 1);
	for (int i = 0; i < L->nload; i++)
		if (L->load[i].p_vaddr + L->load[i].p_memsz > last)
			last = L->load[i].p_vaddr + L->load[i].p_memsz;
	L->span = ((last + pg - 1) & ~(pg - 1)) - first;
	snprintf(name, sizeof(name), "%c_run", lib_letter[l]);
	L->run_off = dc_dso_sym(&L->syms, name, NULL) - first;
	if (L->run_off + first == 0)
		ksft_exit_fail_msg("%s: no %s\n", L->path, name);
	ksft_print_msg("%s: %d segments, %#llx bytes mapped, %s at +%#llx\n", L->path,
		       L->nload, (unsigned long long)L->span, name,
		       (unsigned long long)L->run_off);
}

int main(int argc, char **argv)
{
	char exe[512], *dir;
	struct timespec t0, t1;
	uint64_t baseline;
	ssize_t n;

	if (argc > 1 && !strcmp(argv[1], "--stopped")) {
		/* case 3's execve(): stay alive, stopped, until killed */
		raise(SIGSTOP);
		for (;;)
			pause();
	}
	dry_run = argc > 1 && !strcmp(argv[1], "--dry-run");
	if (!dry_run) {
		ksft_print_header();
		ksft_set_plan(NR_RESULTS);
		is_rust = dc_rust_kernel();
	}
	if (!dry_run && !dc_tables_present()) {
		for (int i = 0; i < NR_RESULTS; i++) {
			if (is_rust)
				ksft_test_result_fail("Rust kernel without %s: the per-mm row cache cannot be tested (fail closed)\n",
						      DC_TABLES_SYSCTL);
			else
				ksft_test_result_skip("no table unwinding on this kernel (no %s): no row cache to test\n",
						      DC_TABLES_SYSCTL);
		}
		dc_finished();
	}
	if (!dry_run && !is_rust)
		ksft_exit_fail_msg("%s on a kernel that is not the Rust one\n", DC_TABLES_SYSCTL);
	if (dc_syms_load())
		ksft_exit_fail_msg("cannot read own symbol table\n");
	if (dc_dso_find(&libc_dso, 0, "libc.so.6"))
		ksft_exit_fail_msg("no libc.so.6 with symbols (not linked dynamically?)\n");
	dc_kallsyms_load();
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		ksft_exit_fail_msg("/proc/self/exe: %s\n", strerror(errno));
	exe[n] = 0;
	dir = dirname(exe);
	lib_init(LIBA, dir);
	lib_init(LIBB, dir);
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ctl == MAP_FAILED)
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
	if (dry_run)
		return dry(argc, argv);
	if (dc_tables_hold() < 0 || dc_tables_set(1))
		ksft_exit_fail_msg("cannot switch %s on\n", DC_TABLES_SYSCTL);
	max_kb_orig = max_kb_get();
	max_kb_owner = getpid();
	if (max_kb_orig < 0)
		ksft_exit_fail_msg("cannot read %s\n", MAX_KB_SYSCTL);
	shared_orig = sysctl_get(SHARED_SYSCTL);
	if (shared_orig < 0)
		ksft_exit_fail_msg("cannot read %s\n", SHARED_SYSCTL);
	atexit(sysctls_restore);
	/* Cases 1-7: every mm's own rows, compiled from its memory. */
	if (!sysctl_set(SHARED_SYSCTL, 0))
		ksft_exit_fail_msg("cannot switch %s off\n", SHARED_SYSCTL);
	baseline = cache_bytes_now();
	if (baseline == UINT64_MAX)
		ksft_exit_fail_msg("no cache_bytes in %s/stats\n", DC_UW_DIR);
	ksft_print_msg("Rust kernel, tables on, %s = %ld; cache_bytes %llu; each phase until %d leaf records of every worker (%d ms of CPU at most)\n",
		       MAX_KB_SYSCTL, max_kb_orig, (unsigned long long)baseline, LEAF_TARGET,
		       PHASE_MS);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	case_warm();
	case_swap();
	case_mappings();
	case_threads();
	case_cap();
	case_shrink();
	case_exit(baseline);
	case_shared();
	case_rewrite();
	for (int i = 0; i < nchildren; i++)
		free_child(&children[i]);
	dc_tables_restore();
	sysctls_restore();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ksft_print_msg("%.1f s (guest time)\n",
		       (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	dc_finished();
}
