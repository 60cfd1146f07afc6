// SPDX-License-Identifier: GPL-2.0
/*
 * The two frameless shared libraries of deferred_tables_cache: liba.so
 * (built -DLIB=a) and libb.so (-DLIB=b -DLIB_B), -O2 -fomit-frame-pointer
 * -fPIC, linked -shared -nostdlib.  Each has its own names:
 *
 *     X_run(depth, ms, stop) -> X_recurse x depth -> X_leaf(ms, stop)
 *
 * X_leaf makes getppid() system calls (raw, inline) until *@stop is set
 * or the thread has used @ms ms of CPU time
 * (clock_gettime(CLOCK_THREAD_CPUTIME_ID), raw too).  There is no libc, no PLT, no GOT and no relocation in them (the
 * functions are exported with protected visibility: calls between them
 * bind locally, direct), so their code runs wherever their pages are
 * mapped, by ld.so or by hand (the test also mmaps the file's segments
 * itself).
 *
 * libb differs from liba where a stale cache would show: a filler
 * function comes first, so its functions start at other offsets, and its
 * recursion has a bigger frame (other CFA offsets).  Rows compiled for
 * liba and applied to libb's code at the same address give wrong CFAs,
 * wrong return addresses: no exact chain.
 */
#include <stdint.h>
#include <sys/syscall.h>

#define PASTE(a, b)	a##_##b
#define NAME(a, b)	PASTE(a, b)
#define F(n)		NAME(LIB, n)

/*
 * Exported, called directly (protected: never through the PLT), and a
 * frame of its own name: no inlining, cloning, identical-code folding.
 */
#define EXPORT		__attribute__((visibility("protected"), noipa))
#define NO_TAIL()	asm volatile("" ::: "memory")

#ifdef LIB_B
#define PAD	400	/* bytes of locals in b_recurse */
#else
#define PAD	24
#endif

static inline __attribute__((always_inline)) long sys3(long nr, long a, long b, long c)
{
	long ret;

	asm volatile("syscall"
		     : "=a"(ret)
		     : "a"(nr), "D"(a), "S"(b), "d"(c)
		     : "rcx", "r11", "memory");
	return ret;
}

static inline __attribute__((always_inline)) uint64_t cpu_ms(void)
{
	struct { long sec, nsec; } t;

	sys3(__NR_clock_gettime, 3 /* CLOCK_THREAD_CPUTIME_ID */, (long)&t, 0);
	return (uint64_t)t.sec * 1000 + t.nsec / 1000000;
}

#ifdef LIB_B
/* Moves libb's other functions to other offsets than liba's. */
EXPORT uint64_t F(filler)(uint64_t x)
{
	for (int i = 0; i < 64; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		x ^= x >> 29;
		NO_TAIL();
	}
	return x;
}
#endif

EXPORT uint64_t F(leaf)(unsigned int ms, const volatile int *stop)
{
	uint64_t end = cpu_ms() + ms, calls = 0;

	do {
		for (int i = 0; i < 64; i++) {
			sys3(__NR_getppid, 0, 0, 0);
			calls++;
		}
	} while (!*stop && cpu_ms() < end);
	return calls;
}

EXPORT uint64_t F(recurse)(int n, unsigned int ms, const volatile int *stop)
{
	volatile char pad[PAD];
	uint64_t r;

	pad[0] = (char)n;
	pad[PAD - 1] = 0;
	r = n > 1 ? F(recurse)(n - 1, ms, stop) : F(leaf)(ms, stop);
	NO_TAIL();	/* no tail call, no accumulator loop */
	return r + 1 + pad[0] + pad[PAD - 1];
}

EXPORT uint64_t F(run)(int depth, unsigned int ms, const volatile int *stop)
{
	uint64_t r = F(recurse)(depth, ms, stop);

	NO_TAIL();
	return r;
}
