// SPDX-License-Identifier: GPL-2.0
/*
 * cpu_time [-w WALL] FILE COMMAND [ARG...]: run COMMAND, wait for it, and
 * write its CPU time (user + system, from wait4()'s rusage: the
 * scheduler's exact runtime, split) in microseconds to FILE; exit with its
 * status.  Used by perf_bench_real.sh and perf_bench_deep.sh, where perf
 * record runs cpu_time, so that the time counted is the program's own,
 * the deferred unwinds of its samples (its task_work) included, and
 * perf's is not.  -w: also write the wall time from fork to wait
 * (CLOCK_MONOTONIC: under QEMU -icount, guest instructions) in
 * microseconds to WALL (perf_bench_deep.sh times perf report with it).
 * COMMAND is a path (execv(), no PATH search).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long mono_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

int main(int argc, char **argv)
{
	const char *wall = NULL;
	long long t0, t1;
	struct rusage ru;
	FILE *out;
	pid_t pid;
	int st;

	if (argc > 2 && !strcmp(argv[1], "-w")) {
		wall = argv[2];
		argc -= 2;
		argv += 2;
	}
	if (argc < 3) {
		fprintf(stderr, "usage: cpu_time [-w WALL] FILE COMMAND [ARG...]\n");
		return 2;
	}
	t0 = mono_us();
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 2;
	}
	if (pid == 0) {
		execv(argv[2], argv + 2);
		perror(argv[2]);
		_exit(127);
	}
	if (wait4(pid, &st, 0, &ru) != pid) {
		perror("wait4");
		return 2;
	}
	t1 = mono_us();
	if (wall) {
		out = fopen(wall, "w");
		if (!out) {
			perror(wall);
			return 2;
		}
		fprintf(out, "%lld\n", t1 - t0);
		fclose(out);
	}
	out = fopen(argv[1], "w");
	if (!out) {
		perror(argv[1]);
		return 2;
	}
	fprintf(out, "%lld\n",
		(long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
		ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
	fclose(out);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 2;
}
