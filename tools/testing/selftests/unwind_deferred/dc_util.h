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
#include <stdint.h>
#include <sys/types.h>
#include <linux/perf_event.h>

#define DC_SAMPLE_TYPE	(PERF_SAMPLE_IP | PERF_SAMPLE_TID | \
			 PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN)
#define DC_MAX_IPS	512

/* Highest user address on x86_64 (TASK_SIZE_MAX with 4-level paging). */
#define DC_USER_MAX	0x00007ffffffff000ULL

struct dc_sample {
	uint32_t pid, tid;
	uint64_t time, ip;
	uint64_t cookie;	/* 0: no PERF_CONTEXT_USER_DEFERRED */
	bool ends_deferred;	/* callchain ends with USER_DEFERRED, cookie */
	bool has_user_ctx;	/* a PERF_CONTEXT_USER appeared */
	uint32_t nr_kernel;
	uint64_t kernel[DC_MAX_IPS];
	int ring;		/* which ring buffer it came from */
};

struct dc_deferred {
	uint32_t pid, tid;
	uint64_t time, cookie;
	uint16_t misc;
	uint32_t nr;
	uint64_t ips[DC_MAX_IPS];
	int ring;
	int matched;		/* number of samples carrying its cookie */
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
};

struct dc_ring {
	int fd;
	void *base;
	size_t data_size;	/* bytes, power of two */
	size_t mmap_size;
	int id;
};

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

/* Symbols of the running binary (/proc/self/exe). */
int dc_syms_load(void);
const char *dc_sym(uint64_t addr, uint64_t *offset);
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
/* Whether the sample's kernel callchain has a frame in function @name. */
bool dc_kernel_stack_has(const struct dc_sample *s, const char *name);
/* Print a merged stack: sample's kernel part + deferred user part. */
void dc_print_merged(const struct dc_sample *s, const struct dc_deferred *d);

/*
 * Does the user stack @ips (nr entries) start with the functions @want
 * (nwant names)?  Frames after the first are return addresses and are
 * looked up at ip - 1.  On mismatch, *where is the first bad index.
 */
bool dc_stack_starts_with(const uint64_t *ips, uint32_t nr,
			  const char *const *want, int nwant, int *where);

/*
 * Is @ip, in the function at @start of @size bytes, where that function
 * has no frame of its own (before push %rbp; mov %rsp,%rbp has run, or at
 * its final ret)?  A frame-pointer walk from there skips its caller.
 */
bool dc_ip_frameless(uint64_t ip, uint64_t start, uint64_t size);

#endif
