#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# flamegraph.sh LOG OUTDIR
#   The flame graph of make demo: take the guest's `perf script
#   --no-inline` output (every sample with its merged deferred user
#   stack), which perf_demo.sh prints gzip'ed and base64'ed between
#   "#### BEGIN/END perf-script.gz.b64" markers of the serial LOG, and
#   draw it with inferno (installed by setup.sh): OUTDIR/perf-script.txt,
#   OUTDIR/stacks.folded (inferno-collapse-perf) and OUTDIR/flamegraph.svg
#   (inferno-flamegraph).  Fails if the log holds no samples.
. "$(dirname "$0")/lib.sh"
LOG=${1:?usage: flamegraph.sh LOG OUTDIR}
OUT=${2:?usage: flamegraph.sh LOG OUTDIR}
. "$TOP/scripts/setup.sh"
INFERNO=$CACHE/inferno-$INFERNO_VERSION/bin
[ -x "$INFERNO/inferno-flamegraph" ] || die "no inferno in $INFERNO (scripts/setup.sh)"
mkdir -p "$OUT"
rm -f "$OUT"/perf-script.txt "$OUT"/stacks.folded "$OUT"/flamegraph.svg

sed -n '/^#### BEGIN perf-script.gz.b64/,/^#### END perf-script.gz.b64/p' "$LOG" |
	sed '1d;$d' | tr -d '\r' | base64 -d | gunzip >"$OUT/perf-script.txt" ||
	die "no perf script output between the markers of $LOG"
samples=$(grep -c ' cpu-clock:' "$OUT/perf-script.txt" || true)
[ "${samples:-0}" -gt 0 ] || die "no samples in the perf script output of $LOG"

# _[k] marks kernel frames: the java palette colours them apart.
"$INFERNO/inferno-collapse-perf" --all "$OUT/perf-script.txt" >"$OUT/stacks.folded"
stacks=$(wc -l <"$OUT/stacks.folded")
counted=$(awk '{ n += $NF } END { print n + 0 }' "$OUT/stacks.folded")
[ "$counted" -gt 0 ] || die "inferno-collapse-perf found no stacks"
variant=$(sed -n 's/.*==== GUEST UP .*variant=\([a-z]*\).*/\1/p' "$LOG" | head -1)
"$INFERNO/inferno-flamegraph" --colors java \
	--title "perf record --call-graph fp,defer: dc_workload, ${variant:-?} kernel" \
	--subtitle "merged stacks (perf script): kernel part from the sample, user part from its deferred record" \
	"$OUT/stacks.folded" >"$OUT/flamegraph.svg"
leaf=$(awk '/;workload_leaf( |;)/ { n += $NF } END { print n + 0 }' "$OUT/stacks.folded")
echo "flame graph: $OUT/flamegraph.svg ($counted of $samples samples in $stacks distinct stacks, $leaf under workload_leaf)"
