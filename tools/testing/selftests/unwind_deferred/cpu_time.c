// SPDX-License-Identifier: GPL-2.0
/*
 * cpu_time FILE COMMAND [ARG...]: run COMMAND, wait for it, and write its
 * CPU time (user + system, from wait4()'s rusage: the scheduler's exact
 * runtime, split) in microseconds to FILE; exit with its status.  Used by
 * perf_bench_real.sh, where perf record runs cpu_time, so that the time
 * counted is the program's own, the deferred unwinds of its samples (its
 * task_work) included, and perf's is not.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct rusage ru;
	FILE *out;
	pid_t pid;
	int st;

	if (argc < 3) {
		fprintf(stderr, "usage: cpu_time FILE COMMAND [ARG...]\n");
		return 2;
	}
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
