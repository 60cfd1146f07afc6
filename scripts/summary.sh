#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# summary.sh NAME...: sum up the results of this `make check` run; each
# NAME must have reported (a stage that silently ran nothing fails).
. "$(dirname "$0")/lib.sh"
p=0 f=0
for n in "$@"; do
	[ -e "$BUILD/results/$n.txt" ] || { echo "  $n: no result"; f=$((f + 1)); }
done
echo "== results"
for r in "$BUILD"/results/*.txt; do
	[ -e "$r" ] || continue
	read -r a b name <"$r"
	printf '  %-24s %5d passed, %d failed\n' "$name" "$a" "$b"
	p=$((p + a)) f=$((f + b))
	# A stage that passed nothing and failed nothing tested nothing.
	if [ "$((a + b))" -eq 0 ]; then
		echo "  $name: no test ran"
		f=$((f + 1))
	fi
done
echo "check: $p passed, $f failed"
[ "$f" -eq 0 ]
