# SPDX-License-Identifier: GPL-2.0
#
# The real programs of perf_real.sh (the test) and perf_bench_real.sh
# (make bench): Debian's own perl, gzip, bzip2, grep and python3.11,
# built without frame pointers and stripped, with their inputs.  Sourced; real_inputs
# writes the inputs into the current directory, real_cmd PROGRAM prints
# its command line (its script and pattern are in those files).
#
# perl runs a recursive sub and a sort with a Perl comparator (pp_sort
# calling back into the interpreter), gzip -9 and bzip2 -9 compress a mix
# of machine code and text (bzip2's work is in libbz2.so), and grep -E
# matches a back-referencing pattern (glibc's backtracking regex matcher),
# python3.11 (a non-PIE executable with the interpreter linked in) runs a
# recursive function and a sort whose key calls back into the
# interpreter (list_sort -> the key's frame: 3.11 runs Python-to-Python
# calls in one C frame, so the C stack nests only through C code).
# Work per program: about a second of guest CPU each under TCG.
PERL_N=${PERL_N:-17}
ZIP_KB=${ZIP_KB:-384}
BZIP_KB=${BZIP_KB:-512}
GREP_LINES=${GREP_LINES:-6000}
PYTHON_N=${PYTHON_N:-22}

# Inputs, made before any profiling, the same for every run: text with
# repeated words for grep; machine code and text for the compressors.
real_inputs() {
	/usr/bin/perl -e 'srand(7); my @w = qw(alpha beta gamma delta omega);
		for (1 .. $ARGV[0]) { print join(" ", map { $w[int rand 5] } 1 .. 8), "\n" }' \
		"$GREP_LINES" >words.txt
	{ head -c $((ZIP_KB * 512)) /usr/bin/perl
	  /usr/bin/perl -e 'for (1 .. $ARGV[0]) { print "$_ ", $_ * $_, " lorem ipsum ", $_ % 97, "\n" }' \
		$((ZIP_KB * 512 / 30)); } | head -c $((ZIP_KB * 1024)) >zip.in
	cat /lib/x86_64-linux-gnu/libc.so.6 /usr/bin/perl | head -c $((BZIP_KB * 1024)) >bzip.in
	# A recursive sub, and a sort whose comparator calls it.
	cat >perl.pl <<'PERL'
sub fib { my $n = shift; $n < 2 ? $n : fib($n - 1) + fib($n - 2) }
my @a = sort { fib($a % 9) <=> fib($b % 9) or $a <=> $b } map { ($_ * 7919) % 1009 } 1 .. 300;
print fib($ARGV[0]), " $a[0]\n";
PERL
	cat >python.py <<'PYTHON'
import sys


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


a = sorted(((i * 7919) % 1009 for i in range(300)), key=lambda x: (fib(x % 9), x))
print(fib(int(sys.argv[1])), a[0])
PYTHON
	# Its first start compiles the encodings package and writes the
	# bytecode next to it: done here, not in the first measured run.
	/usr/bin/python3.11 -S -E -c pass
	# Three times the same word: back-references.
	printf '%s\n' '([a-z]+) .*\1 .*\1 ' >grep.re
}

real_cmd() {
	case $1 in
	perl) echo /usr/bin/perl perl.pl "$PERL_N" ;;
	gzip) echo /usr/bin/gzip -9 -c zip.in ;;
	bzip2) echo /usr/bin/bzip2 -9 -c bzip.in ;;
	grep) echo /usr/bin/grep -c -E -f grep.re words.txt ;;
	python3.11) echo /usr/bin/python3.11 -S -E python.py "$PYTHON_N" ;;
	esac
}
