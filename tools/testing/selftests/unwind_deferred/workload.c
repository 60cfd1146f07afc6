// SPDX-License-Identifier: GPL-2.0
#include <sys/syscall.h>

#include "dc_util.h"
#include "workload.h"

/* Keep the compiler from turning calls into tail jumps. */
#define NO_TAIL() asm volatile("" ::: "memory")

struct ts {
	long sec, nsec;	/* the native ABI of __NR_clock_gettime */
};

/*
 * The thread's CPU time, not wall time: under QEMU TCG a vCPU can lose the
 * host CPU for a while, and a loop timed by the wall clock then ends after
 * a handful of samples.  cpu-clock events count CPU time too.
 */
static inline __attribute__((always_inline)) uint64_t now_ms(void)
{
	struct ts t;

	dc_syscall3(__NR_clock_gettime, 3 /* CLOCK_THREAD_CPUTIME_ID */, (long)&t, 0);
	return (uint64_t)t.sec * 1000 + t.nsec / 1000000;
}

__attribute__((noinline)) uint64_t workload_leaf(unsigned int ms)
{
	uint64_t end = now_ms() + ms, calls = 0;

	do {
		for (int i = 0; i < 64; i++) {
			dc_syscall3(__NR_getppid, 0, 0, 0);
			calls++;
		}
	} while (now_ms() < end);
	return calls;
}

__attribute__((noinline)) uint64_t workload_c(unsigned int ms)
{
	uint64_t r = workload_leaf(ms);

	NO_TAIL();
	return r;
}

__attribute__((noinline)) uint64_t workload_b(unsigned int ms)
{
	uint64_t r = workload_c(ms);

	NO_TAIL();
	return r;
}

__attribute__((noinline)) uint64_t workload_a(unsigned int ms)
{
	uint64_t r = workload_b(ms);

	NO_TAIL();
	return r;
}

__attribute__((noinline)) uint64_t workload(unsigned int ms)
{
	uint64_t r = workload_a(ms);

	NO_TAIL();
	return r;
}
