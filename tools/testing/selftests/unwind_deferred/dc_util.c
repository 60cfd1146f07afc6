// SPDX-License-Identifier: GPL-2.0
/*
 * Helpers shared by the deferred-callchain selftests.  See dc_util.h.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dc_util.h"

void dc_attr_init(struct perf_event_attr *attr, uint64_t period_ns,
		  bool defer_output)
{
	memset(attr, 0, sizeof(*attr));
	attr->size = sizeof(*attr);
	attr->type = PERF_TYPE_SOFTWARE;
	attr->config = PERF_COUNT_SW_CPU_CLOCK;
	attr->sample_period = period_ns;
	attr->sample_type = DC_SAMPLE_TYPE;
	attr->sample_id_all = 1;
	attr->disabled = 1;
	attr->exclude_hv = 1;
	attr->defer_callchain = 1;
	attr->defer_output = defer_output;
	attr->wakeup_events = 1;
}

int dc_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
	    unsigned long flags)
{
	return syscall(__NR_perf_event_open, attr, pid, cpu, group_fd, flags);
}

int dc_ring_map(struct dc_ring *r, int fd, size_t data_pages, int id)
{
	size_t page = sysconf(_SC_PAGESIZE);

	r->fd = fd;
	r->id = id;
	r->data_size = data_pages * page;
	r->mmap_size = (data_pages + 1) * page;
	r->base = mmap(NULL, r->mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		       fd, 0);
	if (r->base == MAP_FAILED) {
		r->base = NULL;
		return -errno;
	}
	return 0;
}

void dc_ring_unmap(struct dc_ring *r)
{
	if (r->base)
		munmap(r->base, r->mmap_size);
	r->base = NULL;
}

#define GROW(arr, nr, cap) do {						\
	if ((nr) == (cap)) {						\
		(cap) = (cap) ? 2 * (cap) : 1024;			\
		(arr) = realloc((arr), (cap) * sizeof(*(arr)));		\
		if (!(arr)) {						\
			perror("realloc");				\
			exit(2);					\
		}							\
	}								\
} while (0)

/* Cursor over one record's payload, bounded by its header size. */
struct cur {
	const uint8_t *p, *end;
	bool bad;
};

static uint64_t get64(struct cur *c)
{
	uint64_t v = 0;

	if (c->end - c->p < 8) {
		c->bad = true;
		return 0;
	}
	memcpy(&v, c->p, 8);
	c->p += 8;
	return v;
}

static void get_pid_tid(struct cur *c, uint32_t *pid, uint32_t *tid)
{
	uint64_t v = get64(c);

	*pid = (uint32_t)v;
	*tid = (uint32_t)(v >> 32);
}

/* The log's memory of ring @ring (NULL for a negative id). */
static struct dc_ring_pos *ring_pos(struct dc_log *log, int ring)
{
	if (ring < 0)
		return NULL;
	if (ring >= log->nr_ring_pos) {
		int n = ring + 1 > 2 * log->nr_ring_pos ? ring + 1 : 2 * log->nr_ring_pos;

		log->ring_pos = realloc(log->ring_pos, n * sizeof(*log->ring_pos));
		if (!log->ring_pos) {
			perror("realloc");
			exit(2);
		}
		memset(log->ring_pos + log->nr_ring_pos, 0,
		       (n - log->nr_ring_pos) * sizeof(*log->ring_pos));
		log->nr_ring_pos = n;
	}
	return &log->ring_pos[ring];
}

/* An item with a time was parsed from @ring: the next lost record's @after. */
static void ring_saw(struct dc_log *log, int ring, uint64_t time)
{
	struct dc_ring_pos *rp = ring_pos(log, ring);

	if (rp && time)
		rp->last_time = time;
}

static void parse_sample(struct cur *c, struct dc_log *log, int ring)
{
	struct dc_sample *s;
	uint64_t nr;

	GROW(log->samples, log->nr_samples, log->cap_samples);
	s = &log->samples[log->nr_samples];
	memset(s, 0, sizeof(*s));
	s->ring = ring;
	s->seq = ++log->seq;
	s->ip = get64(c);
	get_pid_tid(c, &s->pid, &s->tid);
	s->time = get64(c);
	nr = get64(c);
	if (c->bad || nr > (uint64_t)(c->end - c->p) / 8) {
		log->malformed++;
		return;
	}
	for (uint64_t i = 0; i < nr; i++) {
		uint64_t ip = get64(c);

		if (ip == PERF_CONTEXT_USER_DEFERRED && i + 2 == nr) {
			s->cookie = get64(c);
			s->ends_deferred = true;
			break;
		}
		if (ip == PERF_CONTEXT_USER)
			s->has_user_ctx = true;
		if (ip >= PERF_CONTEXT_MAX)
			continue;
		if (s->nr_kernel == DC_MAX_KIPS) {
			log->malformed++;
			break;
		}
		s->kernel[s->nr_kernel++] = ip;
	}
	ring_saw(log, ring, s->time);
	log->nr_samples++;
}

bool dc_sample_id_all = true;

static void parse_deferred(struct cur *c, struct dc_log *log, int ring,
			   uint16_t misc)
{
	struct dc_deferred *d;
	uint64_t nr;

	GROW(log->deferred, log->nr_deferred, log->cap_deferred);
	d = &log->deferred[log->nr_deferred];
	memset(d, 0, sizeof(*d));
	d->ring = ring;
	d->seq = ++log->seq;
	d->misc = misc;
	d->cookie = get64(c);
	nr = get64(c);
	if (c->bad || nr > DC_MAX_IPS || nr > (uint64_t)(c->end - c->p) / 8) {
		log->malformed++;
		return;
	}
	d->nr = nr;
	for (uint64_t i = 0; i < nr; i++) {
		d->ips[i] = get64(c);
		/*
		 * The Rust debug kernel fills new unwind caches with the slab
		 * poison byte (CONFIG_UNWIND_USER_RUST_POISON): an entry no
		 * walk wrote.  Every test fails on a malformed record.
		 */
		if (d->ips[i] == DC_CACHE_POISON) {
			fprintf(stderr, "# record cookie %#llx entry %llu of %llu is the cache poison\n",
				(unsigned long long)d->cookie, (unsigned long long)i,
				(unsigned long long)nr);
			log->malformed++;
		}
	}
	/* sample_id_all trailer: TID, TIME (the attr's sample_type order) */
	if (dc_sample_id_all) {
		get_pid_tid(c, &d->pid, &d->tid);
		d->time = get64(c);
	}
	if (c->bad || c->p != c->end) {
		log->malformed++;
		return;
	}
	ring_saw(log, ring, d->time);
	log->nr_deferred++;
}

static uint64_t lost_total;

uint64_t dc_lost_total(void)
{
	return lost_total;
}

static void parse_lost(struct cur *c, struct dc_log *log, int ring)
{
	struct dc_ring_pos *rp = ring_pos(log, ring);
	struct dc_lost *l;

	GROW(log->losts, log->nr_losts, log->cap_losts);
	l = &log->losts[log->nr_losts];
	memset(l, 0, sizeof(*l));
	l->ring = ring;
	l->seq = ++log->seq;
	l->after = rp ? rp->last_time : 0;
	get64(c);	/* id */
	l->lost = get64(c);
	/* sample_id_all trailer: the next record's TID, TIME */
	if (dc_sample_id_all) {
		get_pid_tid(c, &l->pid, &l->tid);
		l->time = get64(c);
	}
	/* Counted even if malformed: the kernel did drop records. */
	log->lost += l->lost;
	lost_total += l->lost;
	log->lost_records++;
	if (rp)
		rp->lost += l->lost;
	if (c->bad || c->p != c->end) {
		log->malformed++;
		l->time = 0;	/* unknown: no end to its span */
	}
	ring_saw(log, ring, l->time);
	log->nr_losts++;
}

size_t dc_ring_drain(struct dc_ring *r, struct dc_log *log)
{
	struct perf_event_mmap_page *pc = r->base;
	const uint8_t *data = (const uint8_t *)r->base + pc->data_offset;
	uint64_t head, tail;
	uint8_t buf[65536];
	size_t n = 0;

	if (pc->data_offset == 0)
		data = (const uint8_t *)r->base + sysconf(_SC_PAGESIZE);
	head = __atomic_load_n(&pc->data_head, __ATOMIC_ACQUIRE);
	tail = pc->data_tail;

	while (tail < head) {
		struct perf_event_header hdr;
		size_t off = tail & (r->data_size - 1);
		struct cur c;

		for (size_t i = 0; i < sizeof(hdr); i++)
			((uint8_t *)&hdr)[i] = data[(off + i) & (r->data_size - 1)];
		if (hdr.size < sizeof(hdr) || tail + hdr.size > head) {
			log->malformed++;
			tail = head;
			break;
		}
		for (size_t i = 0; i < hdr.size; i++)
			buf[i] = data[(off + i) & (r->data_size - 1)];
		c.p = buf + sizeof(hdr);
		c.end = buf + hdr.size;
		c.bad = false;

		switch (hdr.type) {
		case PERF_RECORD_SAMPLE:
			parse_sample(&c, log, r->id);
			break;
		case PERF_RECORD_CALLCHAIN_DEFERRED:
			parse_deferred(&c, log, r->id, hdr.misc);
			break;
		case PERF_RECORD_LOST:
			parse_lost(&c, log, r->id);
			break;
		default:
			log->other++;
			break;
		}
		tail += hdr.size;
		n++;
	}
	__atomic_store_n(&pc->data_tail, tail, __ATOMIC_RELEASE);
	return n;
}

pid_t dc_profile_child(void (*fn)(void *arg), void *arg,
		       struct perf_event_attr *attr, size_t ring_pages,
		       struct dc_log *log)
{
	struct dc_ring ring;
	int go[2], fd, st, err = 0;
	pid_t pid;
	char c;

	if (pipe(go))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(3);
		fn(arg);
		asm volatile("" ::: "memory");	/* not a tail call */
		raise(SIGSTOP);
		_exit(0);
	}
	close(go[0]);

	fd = dc_open(attr, pid, -1, -1, 0);
	if (fd < 0 || dc_ring_map(&ring, fd, ring_pages, 0) ||
	    ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) || write(go[1], "g", 1) != 1) {
		err = -errno;
		goto out;
	}
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		pid_t w;

		poll(&p, 1, 20);
		dc_ring_drain(&ring, log);
		w = waitpid(pid, &st, WUNTRACED | WNOHANG);
		if (w == pid && WIFSTOPPED(st))
			break;
		if (w == pid) {
			err = -ECHILD;	/* died instead of stopping */
			break;
		}
	}
	ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
	dc_ring_drain(&ring, log);
	dc_ring_unmap(&ring);
out:
	if (fd >= 0)
		close(fd);
	close(go[1]);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return err ? err : pid;
}

void dc_log_free(struct dc_log *log)
{
	free(log->samples);
	free(log->deferred);
	free(log->losts);
	free(log->ring_pos);
	memset(log, 0, sizeof(*log));
}

long long dc_ring_read_lost(struct dc_ring *r, struct dc_log *log)
{
	struct dc_ring_pos *rp = ring_pos(log, r->id);
	uint64_t v[2];	/* read_format PERF_FORMAT_LOST: value, lost */
	struct dc_lost *l;

	if (read(r->fd, v, sizeof(v)) != sizeof(v))
		return -EIO;
	if (!rp || v[1] <= rp->lost)
		return v[1];
	GROW(log->losts, log->nr_losts, log->cap_losts);
	l = &log->losts[log->nr_losts++];
	memset(l, 0, sizeof(*l));
	l->ring = r->id;
	l->seq = ++log->seq;
	l->lost = v[1] - rp->lost;
	l->after = rp->last_time;
	l->pending = true;
	log->lost += l->lost;
	lost_total += l->lost;
	rp->lost = v[1];
	return v[1];
}

const struct dc_lost *dc_lost_in_window(const struct dc_log *log, uint64_t lo,
					uint64_t hi)
{
	for (size_t i = 0; i < log->nr_losts; i++) {
		const struct dc_lost *l = &log->losts[i];
		uint64_t from = l->after > DC_TIME_SLACK_NS ? l->after - DC_TIME_SLACK_NS : 0;
		uint64_t to = l->pending || !l->time ? UINT64_MAX : l->time + DC_TIME_SLACK_NS;

		/* (from, to) meets (lo, hi) */
		if (from < hi && lo < to)
			return l;
	}
	return NULL;
}

const struct dc_lost *dc_orphan_evidence(const struct dc_log *log, uint32_t pid,
					 uint32_t tid, uint64_t cookie,
					 uint64_t time, uint64_t *lo, uint64_t *hi)
{
	*lo = 0;
	*hi = UINT64_MAX;
	for (size_t i = 0; i < log->nr_samples; i++) {
		const struct dc_sample *s = &log->samples[i];

		if (s->pid == pid && s->tid == tid && s->ends_deferred)
			dc_window_narrow(lo, hi, cookie, time, s->cookie, s->time);
	}
	for (size_t i = 0; i < log->nr_deferred; i++) {
		const struct dc_deferred *d = &log->deferred[i];

		if (d->pid == pid && d->tid == tid)
			dc_window_narrow(lo, hi, cookie, time, d->cookie, d->time);
	}
	return dc_lost_in_window(log, *lo, *hi);
}

void dc_print_lost(const char *what, const struct dc_lost *l)
{
	printf("# %s: %s %llu lost in ring %d, dropped after %llu%s, %s %llu (pid %u tid %u)\n",
	       what, l->pending ? "pending (never reported):" : "PERF_RECORD_LOST",
	       (unsigned long long)l->lost, l->ring,
	       (unsigned long long)l->after, l->after ? "" : " (none before it)",
	       l->pending ? "no end" : "written at", (unsigned long long)l->time,
	       l->pid, l->tid);
}

/* ---- symbols ---- */

/* The running binary's own ELF class (32-bit for the compat builds). */
typedef ElfW(Ehdr) elf_ehdr;
typedef ElfW(Shdr) elf_shdr;
typedef ElfW(Sym) elf_sym;

struct sym {
	uint64_t addr, size;
	const char *name;
};

static struct sym *syms;
static size_t nr_syms;

static int sym_cmp(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int dc_syms_load(void)
{
	const elf_ehdr *eh;
	const elf_shdr *sh;
	struct stat st;
	void *map;
	int fd;

	fd = open("/proc/self/exe", O_RDONLY);
	if (fd < 0 || fstat(fd, &st))
		return -errno;
	map = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return -errno;
	eh = map;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_type != ET_EXEC)
		return -ENOEXEC;	/* built -static -no-pie: addresses are final */
	sh = (const void *)((const char *)map + eh->e_shoff);
	for (int i = 0; i < eh->e_shnum; i++) {
		const elf_sym *s;
		const char *str;
		size_t n;

		if (sh[i].sh_type != SHT_SYMTAB)
			continue;
		s = (const void *)((const char *)map + sh[i].sh_offset);
		str = (const char *)map + sh[sh[i].sh_link].sh_offset;
		n = sh[i].sh_size / sizeof(*s);
		syms = calloc(n, sizeof(*syms));
		if (!syms)
			return -ENOMEM;
		for (size_t j = 0; j < n; j++) {
			/*
			 * An undefined function of a dynamically linked
			 * -no-pie binary may carry its PLT entry's address:
			 * not a function of this binary.
			 */
			if (ELF64_ST_TYPE(s[j].st_info) != STT_FUNC || !s[j].st_value ||
			    s[j].st_shndx == SHN_UNDEF)
				continue;
			syms[nr_syms].addr = s[j].st_value;
			syms[nr_syms].size = s[j].st_size;
			syms[nr_syms].name = str + s[j].st_name;
			nr_syms++;
		}
	}
	qsort(syms, nr_syms, sizeof(*syms), sym_cmp);
	return nr_syms ? 0 : -ENOENT;
}

static const struct sym *lookup(const struct sym *tab, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (tab[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &tab[lo - 1] : NULL;
}

const char *dc_sym(uint64_t addr, uint64_t *offset)
{
	const struct sym *s = lookup(syms, nr_syms, addr);

	if (!s || addr >= s->addr + (s->size ? s->size : 1))
		return NULL;
	if (offset)
		*offset = addr - s->addr;
	return s->name;
}

bool dc_sym_is(uint64_t addr, const char *name)
{
	const struct sym *s = lookup(syms, nr_syms, addr);

	if (!s)
		return false;
	/* lookup() gives the last of the symbols that start there */
	for (size_t i = s - syms + 1; i-- > 0 && syms[i].addr == s->addr;)
		if (addr < syms[i].addr + (syms[i].size ? syms[i].size : 1) &&
		    !strcmp(syms[i].name, name))
			return true;
	return false;
}

uint64_t dc_sym_addr(const char *name, uint64_t *size)
{
	for (size_t i = 0; i < nr_syms; i++) {
		if (!strcmp(syms[i].name, name)) {
			if (size)
				*size = syms[i].size;
			return syms[i].addr;
		}
	}
	return 0;
}

static struct sym *ksyms;
static size_t nr_ksyms;

void dc_kallsyms_load(void)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	char name[256], type;
	unsigned long long addr;
	size_t cap = 0;

	if (!f)
		return;
	while (fscanf(f, "%llx %c %255s%*[^\n]", &addr, &type, name) == 3) {
		if (type != 't' && type != 'T')
			continue;
		GROW(ksyms, nr_ksyms, cap);
		ksyms[nr_ksyms].addr = addr;
		ksyms[nr_ksyms].size = 0;
		ksyms[nr_ksyms].name = strdup(name);
		nr_ksyms++;
	}
	fclose(f);
	qsort(ksyms, nr_ksyms, sizeof(*ksyms), sym_cmp);
}

const char *dc_ksym(uint64_t addr)
{
	const struct sym *s = lookup(ksyms, nr_ksyms, addr);

	return s ? s->name : "?";
}

bool dc_kernel_stack_has(const struct dc_sample *s, const char *name)
{
	for (uint32_t i = 0; i < s->nr_kernel; i++)
		if (!strcmp(dc_ksym(s->kernel[i]), name))
			return true;
	return false;
}

bool dc_in_exit_path(const struct dc_sample *s)
{
	return dc_kernel_stack_has(s, "do_exit") ||
	       dc_kernel_stack_has(s, "do_group_exit");
}

bool dc_in_signal_path(const struct dc_sample *s)
{
	return dc_kernel_stack_has(s, "get_signal") ||
	       dc_kernel_stack_has(s, "arch_do_signal_or_restart");
}

long dc_find_deferred(struct dc_log *log, uint32_t pid, uint32_t tid,
		      uint64_t cookie, long *count)
{
	long found = -1;

	*count = 0;
	for (size_t i = 0; i < log->nr_deferred; i++) {
		struct dc_deferred *d = &log->deferred[i];

		if (d->cookie == cookie && d->pid == pid && d->tid == tid) {
			if (found < 0)
				found = i;
			(*count)++;
		}
	}
	return found;
}

static int rec_key_cmp(const void *a, const void *b)
{
	const struct dc_rec_key *x = a, *y = b;

	if (x->cookie != y->cookie)
		return x->cookie < y->cookie ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

struct dc_rec_key *dc_rec_index(const struct dc_log *log)
{
	struct dc_rec_key *keys = calloc(log->nr_deferred + 1, sizeof(*keys));

	if (!keys)
		return NULL;
	for (size_t i = 0; i < log->nr_deferred; i++)
		keys[i] = (struct dc_rec_key){ log->deferred[i].cookie, log->deferred[i].pid,
					       log->deferred[i].tid, (long)i };
	qsort(keys, log->nr_deferred, sizeof(*keys), rec_key_cmp);
	return keys;
}

long dc_rec_find(const struct dc_rec_key *keys, size_t nkeys, uint64_t cookie,
		 uint32_t pid, uint32_t tid, long *count)
{
	struct dc_rec_key k = { cookie, pid, tid, -1 };
	size_t lo = 0, hi = nkeys, i;

	while (lo < hi) {	/* the first key >= k */
		size_t mid = (lo + hi) / 2;

		if (rec_key_cmp(&keys[mid], &k) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (i = lo; i < nkeys && keys[i].cookie == k.cookie &&
		     keys[i].pid == k.pid && keys[i].tid == k.tid; i++)
		;
	*count = i - lo;
	return i > lo ? keys[lo].idx : -1;
}

static const char *user_name(uint64_t ip, bool first)
{
	const char *n = dc_sym(first ? ip : ip - 1, NULL);

	return n ? n : "?";
}

void dc_print_merged(const struct dc_sample *s, const struct dc_deferred *d)
{
	if (s)
		printf("#   sample pid %u tid %u cookie %#llx\n", s->pid,
		       s->tid, (unsigned long long)s->cookie);
	else if (d)
		printf("#   record pid %u tid %u cookie %#llx\n", d->pid,
		       d->tid, (unsigned long long)d->cookie);
	for (uint32_t i = 0; s && i < s->nr_kernel; i++)
		printf("#     %016llx %s [kernel]\n",
		       (unsigned long long)s->kernel[i], dc_ksym(s->kernel[i]));
	for (uint32_t i = 0; d && i < d->nr; i++)
		printf("#     %016llx %s\n", (unsigned long long)d->ips[i],
		       user_name(d->ips[i], i == 0));
}

bool dc_stack_starts_with(const uint64_t *ips, uint32_t nr,
			  const char *const *want, int nwant, int *where)
{
	for (int i = 0; i < nwant; i++) {
		const char *n;

		*where = i;
		if ((uint32_t)i >= nr)
			return false;
		n = dc_sym(i ? ips[i] - 1 : ips[i], NULL);
		if (!n || strcmp(n, want[i]))
			return false;
	}
	return true;
}

bool dc_stack_is(const uint64_t *ips, uint32_t nr, const char *const *want,
		 int nwant, int *where)
{
	if (!dc_stack_starts_with(ips, nr, want, nwant, where))
		return false;
	*where = nwant;
	return nr == (uint32_t)nwant;
}

/* ---- several rings, several tasks ---- */

int dc_ring_open(struct dc_ring *r, struct perf_event_attr *attr, pid_t pid,
		 int cpu, size_t data_pages, int id)
{
	int fd = dc_open(attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	int err;

	memset(r, 0, sizeof(*r));
	r->fd = -1;
	if (fd < 0)
		return -errno;
	err = dc_ring_map(r, fd, data_pages, id);
	if (err) {
		close(fd);
		r->fd = -1;
	}
	return err;
}

int dc_rings_ioctl(struct dc_ring *r, int nr, unsigned long request)
{
	for (int i = 0; i < nr; i++)
		if (ioctl(r[i].fd, request, 0))
			return -errno;
	return 0;
}

size_t dc_rings_poll_drain(struct dc_ring *r, int nr, struct dc_log *log,
			   int timeout_ms)
{
	struct pollfd p[nr];
	size_t n = 0;

	for (int i = 0; i < nr; i++) {
		p[i].fd = r[i].fd;
		p[i].events = POLLIN;
	}
	if (timeout_ms)
		poll(p, nr, timeout_ms);
	for (int i = 0; i < nr; i++)
		n += dc_ring_drain(&r[i], log);
	return n;
}

void dc_rings_close(struct dc_ring *r, int nr)
{
	for (int i = 0; i < nr; i++) {
		dc_ring_unmap(&r[i]);
		if (r[i].fd >= 0)
			close(r[i].fd);
		r[i].fd = -1;
	}
}

long dc_tp_id(const char *system, const char *name)
{
	static const char *const dirs[] = {
		"/sys/kernel/tracing", "/sys/kernel/debug/tracing",
	};
	char path[256];
	long id = -1;
	FILE *f;

	for (int i = 0; i < 2 && id < 0; i++) {
		snprintf(path, sizeof(path), "%s/events/%s/%s/id", dirs[i], system, name);
		if (access(path, R_OK) && i == 0)
			mount("tracefs", dirs[0], "tracefs", 0, NULL);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%ld", &id) != 1)
			id = -1;
		fclose(f);
	}
	return id;
}

int dc_tp_rings_open(struct dc_ring *r, const int *cpus, int nr,
		     const char *system, const char *name, const char *filter,
		     size_t data_pages, int id0)
{
	long id = dc_tp_id(system, name);
	struct perf_event_attr attr;
	int err = 0, i;

	if (id < 0) {
		printf("# no tracepoint %s/%s (tracefs, CONFIG_TRACEPOINTS)\n", system, name);
		return -ENOENT;
	}
	dc_attr_init(&attr, 1, false);
	attr.type = PERF_TYPE_TRACEPOINT;
	attr.config = id;
	attr.use_clockid = 1;
	attr.clockid = CLOCK_MONOTONIC;
	attr.read_format = PERF_FORMAT_LOST;
	for (i = 0; i < nr; i++) {
		err = dc_ring_open(&r[i], &attr, -1, cpus[i], data_pages, id0 + i);
		if (err) {
			printf("# tracepoint %s/%s on CPU %d: %s\n", system, name, cpus[i],
			       strerror(-err));
			break;
		}
		if (ioctl(r[i].fd, PERF_EVENT_IOC_SET_FILTER, filter)) {
			err = -errno;
			printf("# tracepoint %s/%s on CPU %d: filter \"%s\": %s\n", system,
			       name, cpus[i], filter, strerror(-err));
			i++;	/* close this one too */
			break;
		}
	}
	if (err)
		dc_rings_close(r, i);
	return err;
}

void dc_tp_collect(struct dc_ring *r, int nr, struct dc_tp_hits *h)
{
	for (int i = 0; i < nr; i++) {
		dc_ring_drain(&r[i], &h->log);
		for (size_t j = 0; j < h->log.nr_samples; j++) {
			const struct dc_sample *s = &h->log.samples[j];
			struct dc_tp_hit *x;

			GROW(h->v, h->nr, h->cap);
			x = &h->v[h->nr++];
			memset(x, 0, sizeof(*x));
			x->pid = s->pid;
			x->tid = s->tid;
			x->cookie = s->ends_deferred ? s->cookie : 0;
			x->time = s->time;
		}
		h->samples += h->log.nr_samples;
		h->records += h->log.nr_deferred;
		h->sorted = h->sorted && !h->log.nr_samples;
		h->log.nr_samples = h->log.nr_deferred = 0;
	}
}

int dc_tp_finish(struct dc_ring *r, int nr, struct dc_tp_hits *h)
{
	int err = 0;

	dc_rings_ioctl(r, nr, PERF_EVENT_IOC_DISABLE);
	dc_tp_collect(r, nr, h);
	for (int i = 0; i < nr; i++) {
		long long n = dc_ring_read_lost(&r[i], &h->log);

		if (n < 0 && !err)
			err = (int)n;
	}
	dc_rings_close(r, nr);
	return err;
}

static int cmp_tp_hit(const void *a, const void *b)
{
	const struct dc_tp_hit *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->cookie != y->cookie)
		return x->cookie < y->cookie ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

void dc_tp_sort(struct dc_tp_hits *h)
{
	qsort(h->v, h->nr, sizeof(*h->v), cmp_tp_hit);
	h->sorted = true;
}

struct dc_tp_hit *dc_tp_find(struct dc_tp_hits *h, uint32_t pid, uint32_t tid,
			     uint64_t cookie)
{
	struct dc_tp_hit key = { .pid = pid, .tid = tid, .cookie = cookie };

	if (!cookie || !h->nr)
		return NULL;
	if (!h->sorted)
		dc_tp_sort(h);
	return bsearch(&key, h->v, h->nr, sizeof(*h->v), cmp_tp_hit);
}

void dc_tp_free(struct dc_tp_hits *h)
{
	free(h->v);
	dc_log_free(&h->log);
	memset(h, 0, sizeof(*h));
}

int dc_online_cpus(int *cpus, int max)
{
	FILE *f = fopen("/sys/devices/system/cpu/online", "r");
	int n = 0, lo, hi;
	char sep;

	if (!f)
		return -errno;
	/* "0-1,4,6-7\n" */
	while (fscanf(f, "%d", &lo) == 1) {
		hi = lo;
		sep = fgetc(f);
		if (sep == '-') {
			if (fscanf(f, "%d", &hi) != 1)
				break;
			sep = fgetc(f);
		}
		for (int c = lo; c <= hi && n < max; c++)
			cpus[n++] = c;
		if (sep != ',')
			break;
	}
	fclose(f);
	return n;
}

#define DC_PF_KTHREAD	0x00200000	/* include/linux/sched.h */

int dc_is_kthread(uint32_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long flags;
	ssize_t len;
	int fd;

	if (!pid)
		return 1;
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return -1;
	buf[len] = 0;
	/* pid (comm) state ppid pgrp session tty_nr tpgid flags */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) != 1)
		return -1;
	return !!(flags & DC_PF_KTHREAD);
}

bool dc_in_final_stop(const struct dc_log *log, const struct dc_sample *s)
{
	uint64_t last_time = 0, last_cookie = 0;

	for (size_t i = 0; i < log->nr_samples; i++) {
		const struct dc_sample *t = &log->samples[i];

		if (t->pid == s->pid && t->tid == s->tid && t->time >= last_time) {
			last_time = t->time;
			last_cookie = t->cookie;
		}
	}
	/*
	 * get_signal() itself may be missing: a sample in a frameless leaf
	 * it calls (_raw_spin_lock_irq) skips it, the leaf's caller.
	 */
	return s->cookie == last_cookie && dc_in_signal_path(s);
}

/* See deferred_task.c: push %rbp; mov %rsp,%rbp ... pop %rbp; ret */
bool dc_ip_frameless(uint64_t ip, uint64_t start, uint64_t size)
{
	const uint8_t *code = (const uint8_t *)(uintptr_t)start;
	uint64_t prologue;

	/* push %rbp (55), then mov %rsp,%rbp (48 89 e5; 89 e5 on i386) */
	if (code[0] != 0x55)
		return false;
	prologue = code[1] == 0x48 ? 4 : 3;
	return ip - start < prologue ||
	       (ip == start + size - 1 && code[size - 1] == 0xc3);
}

int dc_check_leaf_record(const struct dc_deferred *d, const char *leaf,
			 const char *const *chain, int nchain, bool *frameless)
{
	const char *skip[nchain > 1 ? nchain - 1 : 1];
	const char *const *want = chain;
	uint64_t start, size;
	int where, nwant = nchain;

	*frameless = false;
	start = dc_sym_addr(leaf, &size);
	if (!start || !d->nr || d->ips[0] < start || d->ips[0] >= start + size)
		return -1;
	if (dc_ip_frameless(d->ips[0], start, size)) {
		*frameless = true;
		skip[0] = chain[0];
		for (int i = 2; i < nchain; i++)
			skip[i - 1] = chain[i];
		want = skip;
		nwant = nchain - 1;
	}
	return dc_stack_is(d->ips, d->nr, want, nwant, &where);
}

/*
 * TASK_SIZE_MAX of this kernel: 5-level paging is on iff a page can be
 * mapped above the 47-bit user space (only at an explicit address there).
 * A compat build cannot ask; its records are checked against 4 GiB anyway.
 */
uint64_t dc_user_max(void)
{
	static uint64_t max;

	if (!max) {
		max = DC_USER_MAX_4LEVEL;
#ifdef __x86_64__
		void *hint = (void *)(1UL << 52);
		void *p = mmap(hint, 4096, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			       -1, 0);

		if (p == hint) {
			max = DC_USER_MAX_5LEVEL;
			munmap(p, 4096);
		} else if (p != MAP_FAILED) {
			munmap(p, 4096);
		}
#endif
	}
	return max;
}

int dc_udt_cmd(int fd, const char *fmt, ...)
{
	char buf[96];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof(buf))
		return -EINVAL;
	if (write(fd, buf, n) == n)
		return 0;
	return -errno;
}

const char *dc_variant(void)
{
	static char variant[32];
	static bool read;
	char line[1024];
	FILE *f;

	if (read)
		return variant;
	read = true;
	f = fopen("/proc/cmdline", "r");
	if (f) {
		if (fgets(line, sizeof(line), f)) {
			const char *v = strstr(line, "variant=");

			if (v)
				sscanf(v + 8, "%31[a-z]", variant);
		}
		fclose(f);
	}
	return variant;
}

bool dc_rust_kernel(void)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	const char *variant = dc_variant();
	char line[512];
	bool rust = false;
	size_t lines = 0;

	while (f && !rust && fgets(line, sizeof(line), f)) {
		lines++;
		rust = strstr(line, " perf_callchain_rust\n") != NULL;
	}
	if (f)
		fclose(f);
	/*
	 * Fail closed: the C kernel's rules are the looser ones (upstream's
	 * documented losses are excused there), so a kernel that cannot be
	 * told apart must not get them by default.
	 */
	if (!lines) {
		printf("Bail out! cannot tell which kernel this is: no /proc/kallsyms\n");
		exit(1);
	}
	/* And the guest's variant=, where given, must agree. */
	if ((!strcmp(variant, "c") && rust) || (!strcmp(variant, "rust") && !rust)) {
		printf("Bail out! variant=%s on the command line, but perf_callchain_rust is %s\n",
		       variant, rust ? "present" : "absent");
		exit(1);
	}
	return rust;
}

static bool debugfs_mounted(void)
{
	FILE *f = fopen("/proc/mounts", "r");
	char line[512];
	bool m = false;

	while (f && !m && fgets(line, sizeof(line), f))
		m = strstr(line, " /sys/kernel/debug debugfs ") != NULL;
	if (f)
		fclose(f);
	return m;
}

bool dc_tables_present(void)
{
	if (!debugfs_mounted() &&
	    mount("none", "/sys/kernel/debug", "debugfs", 0, NULL))
		fprintf(stderr, "# mounting debugfs: %s\n", strerror(errno));
	return access(DC_TABLES_SYSCTL, F_OK) == 0;
}

int dc_tables_get(void)
{
	char c = 0;
	int fd = open(DC_TABLES_SYSCTL, O_RDONLY);

	if (fd < 0)
		return -1;
	if (read(fd, &c, 1) != 1)
		c = 0;
	close(fd);
	return c == '1' ? 1 : c == '0' ? 0 : -1;
}

int dc_tables_set(int on)
{
	int fd = open(DC_TABLES_SYSCTL, O_WRONLY), ok;

	if (fd < 0)
		return -errno;
	ok = write(fd, on ? "1" : "0", 1) == 1;
	close(fd);
	if (!ok)
		return -EIO;
	return dc_tables_get() == on ? 0 : -EIO;
}

static int tables_orig = -1;
static pid_t tables_owner;

void dc_tables_restore(void)
{
	if (tables_orig >= 0 && getpid() == tables_owner &&
	    dc_tables_get() != tables_orig)
		dc_tables_set(tables_orig);
}

int dc_tables_hold(void)
{
	tables_orig = dc_tables_get();
	tables_owner = getpid();
	atexit(dc_tables_restore);
	return tables_orig;
}

bool dc_stats_read(struct dc_stats *st)
{
	FILE *f = fopen(DC_UW_DIR "/stats", "r");
	unsigned long long v;
	char name[48];

	st->n = 0;
	if (!f)
		return false;
	while (st->n < DC_MAX_STATS && fscanf(f, "%47s %llu", name, &v) == 2) {
		snprintf(st->name[st->n], sizeof(st->name[0]), "%s", name);
		st->val[st->n++] = v;
	}
	fclose(f);
	return st->n > 0;
}

bool dc_stats_get(const struct dc_stats *st, const char *name, uint64_t *val)
{
	for (int i = 0; i < st->n; i++) {
		if (!strcmp(st->name[i], name)) {
			*val = st->val[i];
			return true;
		}
	}
	return false;
}

/* ---- a shared object's symbols ---- */

static int dsym_cmp(const void *a, const void *b)
{
	const struct dc_dsym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

bool dc_dso_has(const struct dc_dso *d, uint64_t a)
{
	for (int i = 0; i < d->nmaps; i++)
		if (a >= d->lo[i] && a < d->hi[i])
			return true;
	return false;
}

/* Leading underscores, then length: read before __read. */
static bool better_name(const char *a, const char *b)
{
	size_t ua = strspn(a, "_"), ub = strspn(b, "_");

	return ua != ub ? ua < ub : strlen(a) < strlen(b);
}

const char *dc_dso_name(const struct dc_dso *d, uint64_t a, const char *want,
			uint64_t *off)
{
	uint64_t v = a - d->bias;
	size_t lo = 0, hi = d->nsyms;
	const char *best = NULL;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (d->syms[mid].addr <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i-- > 0 && d->syms[i].addr == d->syms[lo - 1].addr;) {
		const struct dc_dsym *s = &d->syms[i];

		if (v >= s->addr + (s->size ? s->size : 1))
			continue;
		if (want) {
			if (!strcmp(s->name, want))
				return s->name;
		} else if (!best || better_name(s->name, best)) {
			best = s->name;
			if (off)
				*off = v - s->addr;
		}
	}
	return best;
}

uint64_t dc_dso_sym(const struct dc_dso *d, const char *name, uint64_t *size)
{
	for (size_t i = 0; i < d->nsyms; i++) {
		if (!strcmp(d->syms[i].name, name)) {
			if (size)
				*size = d->syms[i].size;
			return d->syms[i].addr;
		}
	}
	return 0;
}

int dc_dso_load(struct dc_dso *d, const uint8_t *img, size_t size, uint64_t base)
{
	const ElfW(Ehdr) *eh = (const void *)img;
	const ElfW(Phdr) *ph;
	const ElfW(Shdr) *sh;
	uint64_t page = sysconf(_SC_PAGESIZE);
	int i;

	if (size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != (sizeof(long) == 8 ? ELFCLASS64 : ELFCLASS32) ||
	    eh->e_phoff + eh->e_phnum * sizeof(*ph) > size ||
	    eh->e_shoff + eh->e_shnum * sizeof(*sh) > size)
		return -ENOEXEC;
	ph = (const void *)(img + eh->e_phoff);
	for (i = 0; i < eh->e_phnum && ph[i].p_type != PT_LOAD; i++)
		;
	if (i == eh->e_phnum)
		return -ENOEXEC;
	d->bias = base - ((ph[i].p_vaddr - ph[i].p_offset) & ~(page - 1));
	sh = (const void *)(img + eh->e_shoff);
	for (i = 0; i < eh->e_shnum; i++) {
		const ElfW(Shdr) *str = &sh[sh[i].sh_link];
		const ElfW(Sym) *s;
		size_t n;

		if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh->e_shnum ||
		    sh[i].sh_offset + sh[i].sh_size > size ||
		    str->sh_offset + str->sh_size > size)
			continue;
		s = (const void *)(img + sh[i].sh_offset);
		n = sh[i].sh_size / sizeof(*s);
		d->syms = calloc(n, sizeof(*d->syms));
		if (!d->syms)
			return -ENOMEM;
		for (size_t j = 0; j < n; j++) {
			if (ELF64_ST_TYPE(s[j].st_info) != STT_FUNC ||
			    s[j].st_shndx == SHN_UNDEF || !s[j].st_value ||
			    s[j].st_name >= str->sh_size)
				continue;
			d->syms[d->nsyms].addr = s[j].st_value;
			d->syms[d->nsyms].size = s[j].st_size;
			d->syms[d->nsyms].name = (const char *)img + str->sh_offset + s[j].st_name;
			d->nsyms++;
		}
		qsort(d->syms, d->nsyms, sizeof(*d->syms), dsym_cmp);
		return 0;
	}
	return -ENOENT;
}

int dc_dso_find(struct dc_dso *d, pid_t pid, const char *name)
{
	bool vdso = !strcmp(name, "[vdso]");
	uint64_t base = 0;
	char line[1024];
	struct stat st;
	int fd, err;
	FILE *f;

	memset(d, 0, sizeof(*d));
	if (vdso && pid)
		return -EINVAL;
	snprintf(line, sizeof(line), pid ? "/proc/%d/maps" : "/proc/self/maps", (int)pid);
	f = fopen(line, "r");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi, off;
		char *path, *p;
		int pos = 0;

		if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %n", &lo, &hi, &off, &pos) < 3 || !pos)
			continue;
		path = line + pos;
		path[strcspn(path, "\n")] = 0;
		p = strrchr(path, '/');
		if (vdso ? strcmp(path, name) : !p || strcmp(p + 1, name))
			continue;
		if (d->nmaps == 8)
			continue;
		d->lo[d->nmaps] = lo;
		d->hi[d->nmaps++] = hi;
		if (!off && !base) {
			base = lo;
			snprintf(d->path, sizeof(d->path), "%s", path);
		}
	}
	fclose(f);
	if (!d->nmaps)
		return -ENOENT;
	if (vdso)
		return dc_dso_load(d, (const uint8_t *)(uintptr_t)d->lo[0],
				   d->hi[0] - d->lo[0], d->lo[0]);
	if (!base)
		return -ENOEXEC;	/* no mapping of its ELF header */
	fd = open(d->path, O_RDONLY);
	if (fd < 0 || fstat(fd, &st)) {
		err = -errno;
		if (fd >= 0)
			close(fd);
		return err;
	}
	/* read, not mapped: a forked child must not inherit a mapping of it */
	d->img = malloc(st.st_size);
	err = d->img ? 0 : -ENOMEM;
	for (off_t got = 0; !err && got < st.st_size;) {
		ssize_t n = read(fd, (char *)d->img + got, st.st_size - got);

		if (n <= 0)
			err = n < 0 ? -errno : -EIO;
		got += n;
	}
	close(fd);
	if (err)
		return err;
	d->img_size = st.st_size;
	return dc_dso_load(d, d->img, d->img_size, base);
}

void dc_dso_free(struct dc_dso *d)
{
	free(d->syms);
	free(d->img);
	memset(d, 0, sizeof(*d));
}
