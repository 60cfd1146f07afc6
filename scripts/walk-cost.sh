#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# walk-cost.sh [DEPTH...]: where a warm table walk's instructions go, on
# the host (host/examples/walk_cost.rs under callgrind): instructions a
# frame of the frame-pointer walk and of the table walk over the same
# frames of a recursion, and the table walk's costliest source lines.
# A development aid for the per-frame path; the kernel's own figures are
# make bench's (QEMU -icount).
. "$(dirname "$0")/lib.sh"
command -v valgrind >/dev/null || die "walk-cost: needs valgrind (apt-get install valgrind)"
depths=${*:-15 71 263}
export CARGO_TARGET_DIR=$TOP/target/cost
cd "$TOP"
CARGO_PROFILE_RELEASE_DEBUG=true RUSTFLAGS="-C force-frame-pointers=yes" \
	cargo build -q --release --offline --example walk_cost
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for d in $depths; do
	line=$(valgrind --tool=callgrind --callgrind-out-file="$out/cg.$d" \
		"$CARGO_TARGET_DIR/release/examples/walk_cost" "$d" 2>/dev/null)
	iters=$(sed -n 's/.*iters \([0-9]*\).*/\1/p' <<<"$line")
	frames=$(sed -n 's/.*table_frames \([0-9]*\).*/\1/p' <<<"$line")
	incl() {
		callgrind_annotate --inclusive=yes "$out/cg.$d" 2>/dev/null |
			awk -v f="walk_cost::$1 " '!v && index($0, f) && /\[/ { gsub(",", "", $1); v = $1 }
				END { print v }'
	}
	fp=$(incl fp_walks)
	tab=$(incl table_walks)
	bare=$(incl fallback_walks)
	awk -v d="$d" -v n="$frames" -v i="$iters" -v fp="$fp" -v t="$tab" -v b="$bare" 'BEGIN {
		printf "WALKCOST depth %d: %d frames; instructions a frame: frame pointers %.1f, tables (warm) %.1f (%.2fx), no tables (frame-pointer fallback) %.1f (%.2fx)\n",
			d, n, fp / (n * i), t / (n * i), t / fp, b / (n * i), b / fp }'
done
