// SPDX-License-Identifier: GPL-2.0
/*
 * The record counts and sizes of one perf.data file, for perf_bench.sh:
 *
 *   e2e_records FILE T0 T1 fp|defer
 *
 * prints "samples=N samples_all=N deferred=N entries=N sample_bytes=N
 * deferred_bytes=N ideal_bytes=N depth=N nocookie=N norecord=N
 * multirecord=N records_all=N lost=N throttled=N", the figures perf_bench.sh
 * documents, from the samples whose time is in [T0, T1] (perf record -k
 * mono: the workload's CLOCK_MONOTONIC window) and the
 * PERF_RECORD_CALLCHAIN_DEFERRED records of their cookies.  Figures a
 * classic fp run cannot show are "-".
 *
 * It reads what perf report -D shows (the size in each record's header,
 * the callchain of each sample and deferred record), in a small fraction
 * of the time perf report -D takes to print it under QEMU; perf_bench.sh
 * checks, once per boot, that both give the same figures.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/perf_event.h>

/* tools/perf/util/header.h: the file's header and its sections. */
struct file_section {
	uint64_t offset, size;
};

struct file_header {
	uint64_t magic;
	uint64_t size;
	uint64_t attr_size;
	struct file_section attrs;
	struct file_section data;
	struct file_section event_types;
	uint64_t features[4];
};

#define PERF_MAGIC	0x32454c4946524550ULL	/* "PERFILE2" */
#define MAX_ATTRS	16

struct attr_ids {
	uint64_t sample_type;
	uint64_t read_format;
	uint64_t *ids;
	uint64_t nr_ids;
};

struct sample {
	uint64_t cookie;
	uint32_t size;
};

struct deferred {
	uint64_t cookie;
	uint32_t size;
	uint32_t nr;
};

static unsigned char *file;
static size_t file_size;
static struct attr_ids attrs[MAX_ATTRS];
static int nr_attrs;

static void die(const char *msg)
{
	fprintf(stderr, "e2e_records: %s\n", msg);
	exit(1);
}

static const void *at(uint64_t offset, uint64_t len)
{
	if (offset > file_size || len > file_size - offset)
		die("record or section beyond the end of the file");
	return file + offset;
}

static void read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	size_t cap = 1 << 20, n;

	if (!f) {
		perror(path);
		exit(1);
	}
	file = malloc(cap);
	while (file && (n = fread(file + file_size, 1, cap - file_size, f)) > 0) {
		file_size += n;
		if (file_size == cap) {
			cap *= 2;
			file = realloc(file, cap);
		}
	}
	if (!file || ferror(f))
		die("cannot read the file");
	fclose(f);
}

static void read_attrs(const struct file_header *h)
{
	uint64_t n;

	if (h->attr_size <= sizeof(struct file_section))
		die("bad attr_size");
	n = h->attrs.size / h->attr_size;
	if (!n || n > MAX_ATTRS)
		die("unexpected number of events");
	for (uint64_t i = 0; i < n; i++) {
		const unsigned char *p = at(h->attrs.offset + i * h->attr_size,
					    h->attr_size);
		const struct perf_event_attr *a = (const void *)p;
		const struct file_section *ids =
			(const void *)(p + h->attr_size - sizeof(*ids));

		attrs[i].sample_type = a->sample_type;
		attrs[i].read_format = a->read_format;
		attrs[i].ids = (uint64_t *)at(ids->offset, ids->size);
		attrs[i].nr_ids = ids->size / sizeof(uint64_t);
	}
	nr_attrs = n;
}

/* The attr of a sample: by its identifier, or the only sample_type. */
static const struct attr_ids *attr_of(const uint64_t *body, uint64_t words)
{
	if (attrs[0].sample_type & PERF_SAMPLE_IDENTIFIER) {
		if (!words)
			die("sample without its identifier");
		for (int i = 0; i < nr_attrs; i++)
			for (uint64_t j = 0; j < attrs[i].nr_ids; j++)
				if (attrs[i].ids[j] == body[0])
					return &attrs[i];
		die("sample of an unknown event");
	}
	for (int i = 1; i < nr_attrs; i++)
		if (attrs[i].sample_type != attrs[0].sample_type)
			die("events differ in sample_type and have no identifier");
	return &attrs[0];
}

static int cmp_sample(const void *a, const void *b)
{
	const struct sample *x = a, *y = b;

	return x->cookie < y->cookie ? -1 : x->cookie > y->cookie;
}

static int cmp_deferred(const void *a, const void *b)
{
	const struct deferred *x = a, *y = b;

	return x->cookie < y->cookie ? -1 : x->cookie > y->cookie;
}

int main(int argc, char **argv)
{
	uint64_t t0, t1, off, end;
	uint64_t samples = 0, all = 0, sbytes = 0, own = 0, nocookie = 0;
	uint64_t drec = 0, lost = 0, throttled = 0, depth = 0;
	uint64_t entries = 0, dwin = 0, dbytes = 0, ideal = 0, norec = 0;
	uint64_t multi = 0;
	size_t nr_s = 0, nr_d = 0;
	struct sample *s;
	struct deferred *d;
	const struct file_header *h;
	int defer;

	if (argc != 5 || (strcmp(argv[4], "fp") && strcmp(argv[4], "defer"))) {
		fprintf(stderr, "usage: e2e_records FILE T0 T1 fp|defer\n");
		return 2;
	}
	t0 = strtoull(argv[2], NULL, 0);
	t1 = strtoull(argv[3], NULL, 0);
	defer = !strcmp(argv[4], "defer");
	read_file(argv[1]);
	h = at(0, sizeof(*h));
	if (h->magic != PERF_MAGIC)
		die("not a perf.data file (or not written by perf record to a file)");
	read_attrs(h);
	/* At most one sample or record per 16 bytes. */
	s = calloc(h->data.size / 16 + 1, sizeof(*s));
	d = calloc(h->data.size / 16 + 1, sizeof(*d));
	if (!s || !d)
		die("out of memory");

	end = h->data.offset + h->data.size;
	for (off = h->data.offset; off < end;) {
		const struct perf_event_header *eh = at(off, sizeof(*eh));
		const uint64_t *body = at(off + sizeof(*eh), eh->size - sizeof(*eh));
		uint64_t words = (eh->size - sizeof(*eh)) / 8, i = 0;

		if (eh->size < sizeof(*eh))
			die("record smaller than its header");
		switch (eh->type) {
		case PERF_RECORD_SAMPLE: {
			const struct attr_ids *a = attr_of(body, words);
			uint64_t st = a->sample_type, time = 0, nr, cookie = 0;
			uint64_t nuser = 0;
			int user = 0;

			if (st & PERF_SAMPLE_READ)
				die("PERF_SAMPLE_READ is not handled");
			if (!(st & PERF_SAMPLE_TIME) || !(st & PERF_SAMPLE_CALLCHAIN))
				die("samples without time or callchain");
			i += !!(st & PERF_SAMPLE_IDENTIFIER) + !!(st & PERF_SAMPLE_IP) +
			     !!(st & PERF_SAMPLE_TID);
			time = i < words ? body[i] : 0;
			i++;
			i += !!(st & PERF_SAMPLE_ADDR) + !!(st & PERF_SAMPLE_ID) +
			     !!(st & PERF_SAMPLE_STREAM_ID) + !!(st & PERF_SAMPLE_CPU) +
			     !!(st & PERF_SAMPLE_PERIOD);
			if (i >= words || body[i] > words - i - 1)
				die("sample callchain beyond its record");
			nr = body[i++];
			for (uint64_t k = 0; k < nr; k++) {
				uint64_t ip = body[i + k];

				if (ip == PERF_CONTEXT_USER_DEFERRED && k + 1 < nr) {
					cookie = body[i + k + 1];
					break;
				}
				if (ip == PERF_CONTEXT_USER)
					user = 1;
				else if (user)
					nuser++;
			}
			all++;
			if (time < t0 || time > t1)
				break;
			samples++;
			sbytes += eh->size;
			if (cookie) {
				s[nr_s].cookie = cookie;
				s[nr_s++].size = eh->size;
				own += eh->size - 16;	/* marker and cookie */
			} else {
				nocookie++;
			}
			if (nuser > depth)
				depth = nuser;
			break;
		}
		case PERF_RECORD_CALLCHAIN_DEFERRED:
			/* cookie, nr, ips[nr], then the sample_id fields */
			if (words < 2 || body[1] > words - 2)
				die("bad deferred record");
			d[nr_d].cookie = body[0];
			d[nr_d].nr = body[1];
			d[nr_d++].size = eh->size;
			drec++;
			break;
		case PERF_RECORD_LOST:
		case PERF_RECORD_LOST_SAMPLES:
			lost++;
			break;
		case PERF_RECORD_THROTTLE:
			throttled++;
			break;
		}
		off += eh->size;
	}
	if (off != end)
		die("records overrun the data section");

	/* Entries: the distinct cookies of the window's samples. */
	qsort(s, nr_s, sizeof(*s), cmp_sample);
	qsort(d, nr_d, sizeof(*d), cmp_deferred);
	for (size_t i = 0, j = 0; i < nr_s;) {
		uint64_t c = s[i].cookie, n = 0, bytes = 0;

		entries++;
		while (i < nr_s && s[i].cookie == c)
			i++;
		while (j < nr_d && d[j].cookie < c)
			j++;
		for (; j < nr_d && d[j].cookie == c; j++) {
			n++;
			bytes += d[j].size;
			if (d[j].nr > depth)
				depth = d[j].nr;
		}
		if (!n) {
			norec++;
			continue;
		}
		dwin += n;
		dbytes += bytes;
		ideal += bytes / n;
		multi += n != 1;
	}

	if (!defer) {
		printf("samples=%llu samples_all=%llu deferred=- entries=- sample_bytes=%llu deferred_bytes=- ideal_bytes=- depth=%llu nocookie=- norecord=- multirecord=-",
		       (unsigned long long)samples, (unsigned long long)all,
		       (unsigned long long)sbytes, (unsigned long long)depth);
	} else {
		printf("samples=%llu samples_all=%llu deferred=%llu entries=%llu sample_bytes=%llu deferred_bytes=%llu ideal_bytes=%llu depth=%llu nocookie=%llu norecord=%llu multirecord=%llu",
		       (unsigned long long)samples, (unsigned long long)all,
		       (unsigned long long)dwin, (unsigned long long)entries,
		       (unsigned long long)sbytes, (unsigned long long)dbytes,
		       (unsigned long long)(own + ideal), (unsigned long long)depth,
		       (unsigned long long)nocookie, (unsigned long long)norec,
		       (unsigned long long)multi);
	}
	printf(" records_all=%llu lost=%llu throttled=%llu\n",
	       (unsigned long long)drec, (unsigned long long)lost,
	       (unsigned long long)throttled);
	return 0;
}
