// SPDX-License-Identifier: GPL-2.0
/*
 * The demo's program without frame pointers (built -O2
 * -fomit-frame-pointer, linked dynamically against glibc, which has none
 * either): for about MS milliseconds of CPU time (argument, default 1000),
 * sort small arrays with libc's qsort() through a comparator that makes a
 * system call (getppid()), and read /dev/zero through libc's read() from
 * two callers.  A frame-pointer walk cannot get past the first frameless
 * function; the unwind tables give every frame, down to _start.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define NOIPA __attribute__((noipa))

static char buf[64 * 1024];
static int zero_fd;

NOIPA int sort_cmp(const void *a, const void *b)
{
	getppid();
	return *(const int *)a - *(const int *)b;
}

NOIPA void sort_some(void)
{
	int v[16];

	for (int i = 0; i < 16; i++)
		v[i] = (i * 7919) % 16;
	qsort(v, 16, sizeof(v[0]), sort_cmp);
}

/* Not tail calls: the callers stay on the stack. */
NOIPA long read_from_here(void)
{
	long n = read(zero_fd, buf, sizeof(buf));

	__asm__ volatile("" : "+r"(n));
	return n;
}

NOIPA long read_from_there(void)
{
	long n = read(zero_fd, buf, sizeof(buf) / 2);

	__asm__ volatile("" : "+r"(n));
	return n;
}

static double cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

NOIPA void run(double ms)
{
	double end = cpu_ms() + ms;

	while (cpu_ms() < end) {
		sort_some();
		if (read_from_here() < 0 || read_from_there() < 0)
			exit(1);
	}
}

int main(int argc, char **argv)
{
	zero_fd = open("/dev/zero", O_RDONLY);
	if (zero_fd < 0)
		return 1;
	run(argc > 1 ? atoi(argv[1]) : 1000);
	return 0;
}
