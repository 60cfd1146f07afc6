// SPDX-License-Identifier: GPL-2.0
/*
 * The workload on its own, for profiling with the perf tool:
 *   perf record --call-graph fp,defer -- dc_workload [ms]
 * Every sample in the leaf should merge to
 *   workload_leaf <- workload_c <- workload_b <- workload_a <- workload <- main
 */
#include <stdio.h>
#include <stdlib.h>

#include "workload.h"

int main(int argc, char **argv)
{
	unsigned int ms = argc > 1 ? atoi(argv[1]) : 1000;
	unsigned long long calls = workload(ms);

	/* Keep main's frame live across the call (no tail call). */
	printf("dc_workload: %llu system calls in %u ms\n", calls, ms);
	return 0;
}
