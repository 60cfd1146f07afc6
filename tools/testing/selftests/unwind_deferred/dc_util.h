/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the deferred-callchain selftests: perf_event_open,
 * an mmap'ed ring buffer read without libperf, record parsing for
 * sample_type IP|TID|TIME|CALLCHAIN with sample_id_all, and symbolization
 * from the test binary's own ELF symbol table.
 */
#ifndef DC_UTIL_H
#define DC_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/perf_event.h>

#define DC_SAMPLE_TYPE	(PERF_SAMPLE_IP | PERF_SAMPLE_TID | \
			 PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN)
#define DC_MAX_IPS	512
/*
 * A sample's callchain entries (contexts left out): at most the
 * kernel's perf_event_max_stack, 127 unless a run raises it (none of the
 * dc_util tests does).  Kept apart from DC_MAX_IPS, the deferred
 * record's bound, because a log holds every sample of a run: at 512
 * entries a sample took 4 KiB, a CPU-wide run's log hundreds of MiB, and
 * its reallocation stalled the reader while the rings filled.  A longer
 * chain counts as malformed.
 */
#define DC_MAX_KIPS	128

/*
 * The end of user space on x86_64, TASK_SIZE_MAX: with 4-level paging
 * 0x00007ffffffff000, with 5-level 0x00fffffffffff000; probed at run time
 * (dc_user_max()), so that no check hard-codes the paging mode.
 */
#define DC_USER_MAX_4LEVEL	0x00007ffffffff000ULL
#define DC_USER_MAX_5LEVEL	0x00fffffffffff000ULL
#define DC_USER_MAX	dc_user_max()
uint64_t dc_user_max(void);

/*
 * A command to the test driver of CONFIG_UNWIND_DEFERRED_TEST
 * (kernel/unwind/test_deferred.c) through its ctl file @fd: 0 or -errno.
 */
int dc_udt_cmd(int fd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* What CONFIG_UNWIND_USER_RUST_POISON fills a new unwind cache with. */
#define DC_CACHE_POISON	0x6b6b6b6b6b6b6b6bULL

struct dc_sample {
	uint32_t pid, tid;
	uint64_t time, ip;
	uint64_t cookie;	/* 0: no PERF_CONTEXT_USER_DEFERRED */
	bool ends_deferred;	/* callchain ends with USER_DEFERRED, cookie */
	bool has_user_ctx;	/* a PERF_CONTEXT_USER appeared */
	uint32_t nr_kernel;
	uint64_t kernel[DC_MAX_KIPS];
	int ring;		/* which ring buffer it came from */
	uint64_t seq;		/* its position in the log: see struct dc_log */
};

struct dc_deferred {
	uint32_t pid, tid;
	uint64_t time, cookie;
	uint16_t misc;
	uint32_t nr;
	uint64_t ips[DC_MAX_IPS];
	int ring;
	int matched;		/* number of samples carrying its cookie */
	uint64_t seq;		/* its position in the log: see struct dc_log */
};

/*
 * A PERF_RECORD_LOST: the kernel dropped @lost records of its ring (it had
 * no room) and wrote this before the next record that fitted, with that
 * record's sample_id trailer (@pid, @tid, @time).  So the drops happened
 * after the ring's item before it (its time in @after, 0 if it is the
 * ring's first in the log) and before this one was written.  A pending
 * one was never written: the event counted drops (PERF_FORMAT_LOST) that
 * no record reported, because nothing was written to the ring after them
 * (dc_ring_read_lost()); they follow the ring's last item.
 */
struct dc_lost {
	uint64_t seq;		/* its position in the log */
	uint64_t lost;
	uint64_t time;		/* 0: no sample_id_all, or pending */
	uint64_t after;		/* time of the ring's item before it, 0: none */
	uint32_t pid, tid;
	int ring;
	bool pending;
};

/* What dc_ring_drain() remembers of a ring between drains. */
struct dc_ring_pos {
	uint64_t last_time;	/* time of its last item with one, 0: none */
	uint64_t lost;		/* sum of its lost records' counts */
};

struct dc_log {
	struct dc_sample *samples;
	size_t nr_samples, cap_samples;
	struct dc_deferred *deferred;
	size_t nr_deferred, cap_deferred;
	uint64_t lost;		/* sum of PERF_RECORD_LOST.lost */
	uint64_t lost_records;	/* number of PERF_RECORD_LOST records */
	uint64_t other;		/* records of other types */
	uint64_t malformed;	/* records that did not parse */
	/*
	 * Every PERF_RECORD_LOST, and the pending drops dc_ring_read_lost()
	 * found.  @seq numbers the samples, deferred records and lost
	 * records in the order they were parsed: dc_ring_drain() reads one
	 * ring from its tail to its head, so the items of one ring have
	 * increasing numbers in that ring's order; numbers of different
	 * rings say nothing about their order (dc_rings_poll_drain() and the
	 * tests drain the rings one after the other).
	 */
	struct dc_lost *losts;
	size_t nr_losts, cap_losts;
	uint64_t seq;
	struct dc_ring_pos *ring_pos;	/* by ring id */
	int nr_ring_pos;
};

struct dc_ring {
	int fd;
	void *base;
	size_t data_size;	/* bytes, power of two */
	size_t mmap_size;
	int id;
};

/*
 * A system call made inline, so that the sample's user IP, and the first
 * frame of its user stack, is the calling function (a libc wrapper would
 * add a frameless function in between).  int $0x80 leaves %ebp, the frame
 * pointer, alone on i386.
 */
static inline __attribute__((always_inline))
long dc_syscall3(long nr, long a, long b, long c)
{
	long ret;
#ifdef __x86_64__
	asm volatile("syscall"
		     : "=a"(ret)
		     : "a"(nr), "D"(a), "S"(b), "d"(c)
		     : "rcx", "r11", "memory");
#else
	asm volatile("int $0x80"
		     : "=a"(ret)
		     : "a"(nr), "b"(a), "c"(b), "d"(c)
		     : "memory");
#endif
	return ret;
}

/*
 * Whether the events have sample_id_all (dc_attr_init() sets it): without
 * it, deferred records end right after their entries and carry no pid,
 * tid or time (0 in struct dc_deferred).
 */
extern bool dc_sample_id_all;

/* attr for a cpu-clock sampling event with deferred user callchains. */
void dc_attr_init(struct perf_event_attr *attr, uint64_t period_ns,
		  bool defer_output);
int dc_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
	    unsigned long flags);
/* Map 1 + data_pages (power of two) pages of @fd. */
int dc_ring_map(struct dc_ring *r, int fd, size_t data_pages, int id);
void dc_ring_unmap(struct dc_ring *r);
/* Move every complete record from @r into @log.  Returns records read. */
size_t dc_ring_drain(struct dc_ring *r, struct dc_log *log);

void dc_log_free(struct dc_log *log);

/*
 * The drops @r's event counted but no PERF_RECORD_LOST in @log reported
 * yet: read its count (the event's read_format must be exactly
 * PERF_FORMAT_LOST) and, if it exceeds the sum of the ring's lost records
 * in @log, add a pending struct dc_lost for the rest, after the ring's
 * last item.  Call it after the last dc_ring_drain() of @r (disabled, or
 * nothing written to it any more).  Returns the count, or -errno.
 */
long long dc_ring_read_lost(struct dc_ring *r, struct dc_log *log);

/*
 * Records this process's rings dropped, as far as it read: the counts of
 * every PERF_RECORD_LOST dc_ring_drain() parsed and of every pending drop
 * dc_ring_read_lost() found, in any log.
 */
uint64_t dc_lost_total(void);

/*
 * A test's end when its checks need every record.  A run that failed and
 * whose rings dropped records cannot tell the kernel's failures from the
 * reader's (the guest fell behind: CPU-wide rings on the debug kernel, a
 * slow host): it says so and exits DC_EXIT_LOST, and /init runs the test
 * again, at most DC_ATTEMPTS times in all.  scripts/guestlog.py prints
 * every such attempt's failures and counts it; a last attempt that ends
 * so fails the section.  A run that passed, or failed without a drop,
 * ends as ksft_finished() says.  (A macro: kselftest.h's counts are the
 * test's own.)
 */
#define DC_EXIT_LOST	75	/* EX_TEMPFAIL */
#define DC_ATTEMPTS	3
#define dc_finished() do {						\
	if (ksft_get_fail_cnt() && dc_lost_total()) {			\
		ksft_print_msg("inconclusive: %d failed, and the rings dropped %llu records: exit %d, run again (%d attempts in all)\n", \
			       ksft_get_fail_cnt(),			\
			       (unsigned long long)dc_lost_total(),	\
			       DC_EXIT_LOST, DC_ATTEMPTS);		\
		ksft_print_cnts();					\
		exit(DC_EXIT_LOST);					\
	}								\
	ksft_finished();						\
} while (0)

/* ---- orphans: which lost record explains one ---- */

/*
 * The rule for excusing an orphan (a sample whose deferred record never
 * arrived, or a deferred record none of whose samples arrived) of thread
 * T, entry cookie C, by a lost record.
 *
 * Where the missing item was due: a deferred record is written by the
 * task_work when T's kernel entry returns to user space; a sample is taken
 * during the entry, possibly after the task_work (a sample after its
 * record).  Either way within the entry, which began after every item of
 * T that belongs to an earlier entry (a sample or record of T with another
 * non-zero cookie) and ended before every item of T of a later entry.  So
 * the missing item's time is in the open window (lo, hi): lo the latest
 * time of T's items of other entries before the orphan, hi the earliest
 * after it (0 and UINT64_MAX: none in the log).  dc_window_narrow() builds
 * it item by item; an item at the orphan's own time bounds nothing.
 *
 * Which ring: with per-CPU rings (events opened per CPU, as perf record
 * and deferred_lost, deferred_stress do), a sample goes to the ring of
 * the CPU it was taken on and the deferred record to the ring of the CPU
 * the task_work ran on (perf_iterate_sb() writes to the events of the CPU
 * it runs on, see deferred_cpu.c), and T may migrate in between: the
 * record's ring is not known, and positions in different rings cannot be
 * compared.  So the rule compares times (the events must share one clock
 * across CPUs: use_clockid with CLOCK_MONOTONIC) and takes any ring of
 * the session, which also holds for a single ring.
 *
 * What a lost record covers: the drops it reports happened after the
 * ring's item before it (@after) and before it was written (@time: it is
 * written with the next record that fits, and carries that record's
 * time); a pending one after the ring's last item, with no end.
 *
 * The rule: an orphan is explained iff some lost record of the session
 * (in any of its rings) covers a span that meets (lo, hi), each end of
 * the span widened by DC_TIME_SLACK_NS.  The slack covers a record or
 * sample whose time was taken just before an interrupt nested a write to
 * the same ring (then ring order and time order differ by that nesting).
 * Anything else is an orphan without evidence, which the tests fail.
 *
 * On a single ring written by one task at a time this is the position
 * rule (a lost record after the last item of an earlier entry and before
 * the first of a later one), up to the slack; it is deliberately not "a
 * lost record after the orphan sample": a sample taken after its entry's
 * task_work ran may itself carry the lost record of its dropped record,
 * written just before it.
 */
#define DC_TIME_SLACK_NS	2000000ULL

/* Narrow the window of the entry (@cookie, at @time) by an item (@c, @t) of T. */
static inline void dc_window_narrow(uint64_t *lo, uint64_t *hi, uint64_t cookie,
				    uint64_t time, uint64_t c, uint64_t t)
{
	if (!c || c == cookie || !t)
		return;
	if (t < time && t > *lo)
		*lo = t;
	if (t > time && t < *hi)
		*hi = t;
}

/* The first lost record of @log whose span meets (@lo, @hi), or NULL. */
const struct dc_lost *dc_lost_in_window(const struct dc_log *log, uint64_t lo,
					uint64_t hi);

/*
 * For an orphan of @log itself (pid, tid, cookie, time of the orphan
 * sample or record): its window from @log's samples and records of that
 * thread (*@lo, *@hi), and the lost record that explains it, or NULL.
 */
const struct dc_lost *dc_orphan_evidence(const struct dc_log *log, uint32_t pid,
					 uint32_t tid, uint64_t cookie,
					 uint64_t time, uint64_t *lo, uint64_t *hi);

/* Print a lost record (for evidence): ring, time, span, count. */
void dc_print_lost(const char *what, const struct dc_lost *l);

/*
 * Sessions opened and closed during a run (deferred_stress's third
 * sessions, deferred_races case 6) miss the record of an entry whose
 * task_work ran before their events were enabled on the CPU it ran on, or
 * after they were disabled there or last read; a sample of such an entry
 * is an orphan there.  The evidence is the time the record was written,
 * taken from an event open the whole time with the same clock (a witness:
 * the callback writes each record to every defer_output event it reaches,
 * in one pass), against the moments the session was open on every CPU:
 * @open_done (after the last enable returned) and @close_start (before the
 * first disable, close, or the last read).  DC_EDGE_CLOSE: written at or
 * after close_start - DC_TIME_SLACK_NS; DC_EDGE_OPEN: at or before
 * open_done + DC_TIME_SLACK_NS; DC_EDGE_NONE: while the session was open
 * on every CPU, so it must have the record (the slack covers the time one
 * pass of the callback takes from one event to the next).
 */
enum { DC_EDGE_NONE, DC_EDGE_OPEN, DC_EDGE_CLOSE };

static inline int dc_edge(uint64_t written, uint64_t open_done,
			  uint64_t close_start)
{
	if (written + DC_TIME_SLACK_NS >= close_start)
		return DC_EDGE_CLOSE;
	if (written <= open_done + DC_TIME_SLACK_NS)
		return DC_EDGE_OPEN;
	return DC_EDGE_NONE;
}

/* Symbols of the running binary (/proc/self/exe). */
int dc_syms_load(void);
const char *dc_sym(uint64_t addr, uint64_t *offset);
/*
 * Is @addr in a function named @name?  Unlike dc_sym(), every alias of the
 * function counts (static glibc's read, __read and __libc_read).
 */
bool dc_sym_is(uint64_t addr, const char *name);
/* Start address and size of function @name, 0 if absent. */
uint64_t dc_sym_addr(const char *name, uint64_t *size);
/* Kernel symbols from /proc/kallsyms, for printing only. */
void dc_kallsyms_load(void);
const char *dc_ksym(uint64_t addr);

/*
 * Profile a child: fork it, open a per-task event with @attr on it, map
 * a ring of @ring_pages, enable, let the child run @fn(@arg), and collect
 * every record into @log until the child has stopped itself (SIGSTOP
 * after @fn returns); then disable, drain, kill and reap it.  Returns the
 * child's pid, or -errno.  (Why SIGSTOP: see deferred_task.c.)
 */
pid_t dc_profile_child(void (*fn)(void *arg), void *arg,
		       struct perf_event_attr *attr, size_t ring_pages,
		       struct dc_log *log);

/* Index of the deferred record for (pid, tid, cookie), or -1. */
long dc_find_deferred(struct dc_log *log, uint32_t pid, uint32_t tid,
		      uint64_t cookie, long *count);
/*
 * dc_find_deferred() by binary search, for thousands of samples and
 * records: dc_rec_index() sorts (cookie, pid, tid, index) of @log's
 * records (NULL if out of memory; free() it), dc_rec_find() looks one up
 * among the @nkeys (@log's nr_deferred) as dc_find_deferred() does.
 */
struct dc_rec_key {
	uint64_t cookie;
	uint32_t pid, tid;
	long idx;
};
struct dc_rec_key *dc_rec_index(const struct dc_log *log);
long dc_rec_find(const struct dc_rec_key *keys, size_t nkeys, uint64_t cookie,
		 uint32_t pid, uint32_t tid, long *count);
/* Whether the sample's kernel callchain has a frame in function @name. */
bool dc_kernel_stack_has(const struct dc_sample *s, const char *name);
/* In do_exit() or do_group_exit(). */
bool dc_in_exit_path(const struct dc_sample *s);
/*
 * In get_signal() or its caller: get_signal() itself may be missing, as
 * a sample in a frameless leaf it calls skips it.
 */
bool dc_in_signal_path(const struct dc_sample *s);
/*
 * Print a merged stack: sample's kernel part + deferred user part (either
 * may be NULL).
 */
void dc_print_merged(const struct dc_sample *s, const struct dc_deferred *d);

/*
 * Does the user stack @ips (nr entries) start with the functions @want
 * (nwant names)?  Frames after the first are return addresses and are
 * looked up at ip - 1.  On mismatch, *where is the first bad index.
 */
bool dc_stack_starts_with(const uint64_t *ips, uint32_t nr,
			  const char *const *want, int nwant, int *where);

/*
 * Is the user stack @ips exactly @want: the same functions, and no more
 * frames?  On mismatch, *where is the first bad index (@nwant if the
 * record is longer).
 */
bool dc_stack_is(const uint64_t *ips, uint32_t nr, const char *const *want,
		 int nwant, int *where);

/*
 * Where the walk of a record ends, in these static binaries: after main,
 * the frame it returns to and nothing else.  Debian's static glibc is
 * built without frame pointers.  main() is called by
 * __libc_start_call_main(), which has no frame record and leaves %rbp as
 * __libc_start_main() left it: the base of its loop over .init_array,
 * __init_array_start ("lea __frame_dummy_init_array_entry(%rip),%rbp"),
 * a static data address.  The frame record main() pushes therefore gives
 * the return address into __libc_start_call_main, then a frame pointer
 * far below the stack pointer: the deferred walk (upstream's user.c and
 * the Rust walker alike) only goes upwards, so it ends there on both
 * kernels.  __libc_start_main and _start are never reached.  (perf's
 * in-place walk, without defer_callchain, has no such check and reads
 * .init_array as a frame: see deferred_entry.)  The i386 build
 * (deferred_task_32) ends at the same frame on both kernels in every leaf
 * record; its code was not analysed further.
 * A record that goes on, or stops earlier, fails the exact checks and is
 * printed.
 */
#define DC_MAIN_FRAMES	"main", "__libc_start_call_main"

/*
 * The same for a thread's function, thread_main() in deferred_threads:
 * __clone3's child zeroes %rbp ("xor %ebp,%ebp") before calling
 * start_thread(), which pushes it unchanged and calls the thread function
 * without writing %rbp.  So the thread function's frame record holds a
 * zero frame pointer: the walk gives the return address into start_thread
 * and ends (on both kernels, in every record).  __clone3 is never reached.
 */
#define DC_THREAD_FRAMES	"thread_main", "start_thread"

/* ---- several rings, several tasks (deferred_threads, _cpu, _sessions) ---- */

/* Open an event with @attr on (@pid, @cpu) and map its ring as ring @id. */
int dc_ring_open(struct dc_ring *r, struct perf_event_attr *attr, pid_t pid,
		 int cpu, size_t data_pages, int id);
/* PERF_EVENT_IOC_ENABLE / _DISABLE on every ring's event. */
int dc_rings_ioctl(struct dc_ring *r, int nr, unsigned long request);
/* Wait up to @timeout_ms for data on any of @nr rings, then drain all. */
size_t dc_rings_poll_drain(struct dc_ring *r, int nr, struct dc_log *log,
			   int timeout_ms);
void dc_rings_close(struct dc_ring *r, int nr);

/*
 * The id of tracepoint @system/@name (tracefs, mounted on
 * /sys/kernel/tracing if need be; or under debugfs), for a
 * PERF_TYPE_TRACEPOINT event's config; -1 if there is none.
 */
long dc_tp_id(const char *system, const char *name);
/*
 * Tracepoint samples as evidence of a task's last kernel entry.
 *
 * Upstream 7.3 loses the record of a task's last kernel entry when that
 * entry's unwind is still pending at do_exit() (docs/deviations.md).  A
 * test excuses such a sample on the C kernel only if a tracepoint sample
 * the task took in that entry, before do_exit() set PF_EXITING, carries
 * the same cookie (every request of one entry gets the entry's cookie):
 * raw_syscalls/sys_enter filtered to exit_group() (id == 231 on x86-64,
 * 252 on i386) for a task that exits by itself, signal/signal_deliver
 * filtered to sig == 9 for one killed by a signal (get_signal() traces the
 * SIGKILL of a group exit, SIGNAL_GROUP_EXIT or group_exec_task, and then
 * calls do_group_exit(), in kernel/signal.c).  Neither returns to user
 * space: the cookie is the task's last.
 *
 * dc_tp_rings_open() opens tracepoint @system/@name with @filter as one
 * CPU-wide event per CPU of @cpus (@nr of them, ring ids @id0 on), every
 * hit sampled, disabled: defer_callchain (its samples carry the cookie),
 * not defer_output (its rings get its samples only), CLOCK_MONOTONIC,
 * read_format PERF_FORMAT_LOST (for dc_ring_read_lost()).  Returns 0,
 * -ENOENT if there is no such tracepoint, or -errno (printed as a "# "
 * line with the CPU and the step that failed); on failure no ring is open.
 */
int dc_tp_rings_open(struct dc_ring *r, const int *cpus, int nr,
		     const char *system, const char *name, const char *filter,
		     size_t data_pages, int id0);

/* One tracepoint sample: its task, and its cookie (0: it had none). */
struct dc_tp_hit {
	uint32_t pid, tid;
	uint64_t cookie;
	uint64_t time;
	const void *mark;	/* the caller's, NULL to begin with */
};

/*
 * Every sample of a tracepoint's rings.  @log keeps the rings' losses,
 * lost records and malformed records for the caller to check (its samples
 * and records are moved out at each dc_tp_collect()); @records counts the
 * deferred records the rings had (none is expected: no defer_output).
 */
struct dc_tp_hits {
	struct dc_tp_hit *v;
	size_t nr, cap;
	bool sorted;
	uint64_t samples, records;
	struct dc_log log;
};

/* Drain @nr rings @r: each sample's (pid, tid, cookie, time) into @h. */
void dc_tp_collect(struct dc_ring *r, int nr, struct dc_tp_hits *h);
/*
 * Disable the rings, collect what is left, add the drops no
 * PERF_RECORD_LOST reported (dc_ring_read_lost()) to @h->log and close
 * them.  Returns 0 or -errno (of reading a lost count).
 */
int dc_tp_finish(struct dc_ring *r, int nr, struct dc_tp_hits *h);
/*
 * The sample of (@pid, @tid) whose cookie is @cookie, or NULL (always
 * for cookie 0).  Sorts @h first if it is not (dc_tp_sort()); a caller
 * that drops elements of @h->v clears @h->sorted.
 */
struct dc_tp_hit *dc_tp_find(struct dc_tp_hits *h, uint32_t pid, uint32_t tid,
			     uint64_t cookie);
void dc_tp_sort(struct dc_tp_hits *h);
void dc_tp_free(struct dc_tp_hits *h);

/* The online CPUs (/sys/devices/system/cpu/online), at most @max. */
int dc_online_cpus(int *cpus, int max);
/* Is @pid the idle task (0) or a kernel thread (PF_KTHREAD)?  -1: gone. */
int dc_is_kthread(uint32_t pid);

/*
 * Is @s, whose cookie has no deferred record, a sample of its thread's
 * last kernel entry taken on the way into a signal stop, after that
 * entry's task_work ran (the signal code on its kernel stack, latest
 * cookie of its tid in @log)?  Its record is due at the next return to user
 * space.  See deferred_task.c.
 */
bool dc_in_final_stop(const struct dc_log *log, const struct dc_sample *s);

/*
 * Check a deferred record taken in a workload leaf.  If its first frame
 * is in function @leaf, compare the stack with @chain (@nchain names)
 * and return 1 (the whole record is exactly that, dc_stack_is()) or 0
 * (not); return -1 if the record does not
 * start in @leaf.  Where the leaf has no frame (before its prologue, at
 * its final ret), a frame-pointer walk skips the leaf's caller: then the
 * expected stack is @chain without its second entry, and *frameless is
 * set.
 */
int dc_check_leaf_record(const struct dc_deferred *d, const char *leaf,
			 const char *const *chain, int nchain, bool *frameless);

/*
 * GCC omits the frame of a leaf that uses no stack, even with
 * -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer; then a
 * frame-pointer walk from it skips its caller.  Using the frame address
 * makes it set one up (reading a byte of the saved frame pointer).
 */
#define DC_KEEP_FRAME() ((void)*(volatile char *)__builtin_frame_address(0))

/* Cookie fields (include/linux/unwind_deferred_types.h): cpu + 1, count. */
static inline int dc_cookie_cpu(uint64_t cookie)
{
	return (int)(uint32_t)cookie - 1;
}

/*
 * Is @ip, in the function at @start of @size bytes, where that function
 * has no frame of its own (before push %rbp; mov %rsp,%rbp has run, or at
 * its final ret)?  A frame-pointer walk from there skips its caller.
 */
bool dc_ip_frameless(uint64_t ip, uint64_t start, uint64_t size);

/* ---- which kernel; the Rust kernel's unwind tables (debugfs) ---- */

/*
 * The guest's variant= on /proc/cmdline without its -debug suffix ("c",
 * "rust"), or "" if there is none.
 */
const char *dc_variant(void);

/*
 * Is this the Rust kernel (perf_callchain_rust in /proc/kallsyms)?  Exits
 * the test if that cannot be told or contradicts dc_variant().
 */
bool dc_rust_kernel(void);

#define DC_UW_DIR	"/sys/kernel/debug/unwind_user"
/* The tables switch (CONFIG_UNWIND_USER_RUST_TABLES; "1" or "0"). */
#define DC_TABLES_SYSCTL	"/proc/sys/kernel/unwind_user_tables"

/*
 * Does the kernel have the tables switch?  Mounts debugfs if needed (for
 * the counters).
 */
bool dc_tables_present(void);
/* The switch: 1 on, 0 off, -1 unreadable. */
int dc_tables_get(void);
/* Set the switch and check it took: 0, or -errno. */
int dc_tables_set(int on);
/*
 * Remember the switch's value, put back by dc_tables_restore() and at exit
 * (of this process, not of its forked children).  Returns the value.
 */
int dc_tables_hold(void);
void dc_tables_restore(void);

/* The counters of DC_UW_DIR/stats ("name value" lines). */
#define DC_MAX_STATS	64
struct dc_stats {
	int n;
	char name[DC_MAX_STATS][48];
	uint64_t val[DC_MAX_STATS];
};
/* Read them; false if there are none. */
bool dc_stats_read(struct dc_stats *st);
/* Counter @name of @st into *@val; false if @st has none of that name. */
bool dc_stats_get(const struct dc_stats *st, const char *name, uint64_t *val);

/* ---- a shared object's symbols (its .dynsym), as mapped in a process ---- */

struct dc_dsym {
	uint64_t addr, size;	/* link-time address */
	const char *name;
};

struct dc_dso {
	uint64_t lo[8], hi[8];	/* its mappings */
	int nmaps;
	uint64_t bias;		/* run-time address - link-time address */
	struct dc_dsym *syms;	/* its functions in .dynsym, by address */
	size_t nsyms;
	char path[512];
	void *img;		/* the file, read into memory (the names) */
	size_t img_size;
};

/*
 * The functions in .dynsym of the ELF image @img (@size bytes, of this
 * program's class), whose first PT_LOAD's page is mapped at @base.
 */
int dc_dso_load(struct dc_dso *d, const uint8_t *img, size_t size, uint64_t base);
/*
 * The object @name (the last component of its path, or "[vdso]": only
 * for @pid 0) as /proc/@pid/maps (0: self) has it: every mapping of it
 * (at most 8), its load bias from the lowest mapping of file offset 0,
 * and its symbols, read from the file (the vDSO from memory).  0, -ENOENT
 * if it is not mapped, or -errno.  Free with dc_dso_free().
 */
int dc_dso_find(struct dc_dso *d, pid_t pid, const char *name);
void dc_dso_free(struct dc_dso *d);
/* Is run-time address @a in one of @d's mappings? */
bool dc_dso_has(const struct dc_dso *d, uint64_t a);
/*
 * The dynamic symbol of @d that contains run-time address @a: with @want,
 * that alias if it is one (else NULL); without, the best of its names
 * (fewest leading underscores, then shortest), its offset in *@off.
 */
const char *dc_dso_name(const struct dc_dso *d, uint64_t a, const char *want,
			uint64_t *off);
/* The link-time address of function @name (its size in *@size), 0 if none. */
uint64_t dc_dso_sym(const struct dc_dso *d, const char *name, uint64_t *size);

#endif
