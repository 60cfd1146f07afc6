/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A frame-pointer workload with a known user call chain:
 *
 *   main -> ... -> workload -> workload_a -> workload_b -> workload_c
 *        -> workload_leaf (system calls in a loop)
 *
 * The leaf issues its system calls with inline asm, not through a libc
 * wrapper, so that the syscall's user IP is inside workload_leaf and the
 * frame-pointer chain from there is complete.  Built with frame pointers,
 * no inlining and no sibling calls (see the Makefile).
 */
#ifndef WORKLOAD_H
#define WORKLOAD_H

#include <stdint.h>

/* The user frames every sample taken in the leaf must start with. */
#define WORKLOAD_CHAIN "workload_leaf", "workload_c", "workload_b", \
		       "workload_a", "workload"

/* Run system calls in the leaf until the thread has used @ms of CPU time. */
uint64_t workload(unsigned int ms);

#endif
