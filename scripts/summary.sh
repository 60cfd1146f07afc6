#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Sum up the results of this `make check` run.
. "$(dirname "$0")/lib.sh"
p=0 f=0
echo "== results"
for r in "$BUILD"/results/*.txt; do
	[ -e "$r" ] || continue
	read -r a b name <"$r"
	printf '  %-24s %5d passed, %d failed\n' "$name" "$a" "$b"
	p=$((p + a)) f=$((f + b))
done
echo "check: $p passed, $f failed"
[ "$f" -eq 0 ]
