#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Host-side tests (no kernel needed).  Results go to $BUILD/results.
. "$(dirname "$0")/lib.sh"
mkdir -p "$BUILD/results"
# py_tests TEST RESULT WHAT: one of the scripts' own unittest files; a
# run that executed no test fails.
py_tests() {
	local test=$1 result=$2 what=$3 out n
	out=$(python3 "$TOP/scripts/$test" 2>&1) || { echo "$out"; die "$test failed"; }
	n=$(echo "$out" | sed -n 's/^Ran \([0-9]*\) tests.*/\1/p')
	[ "${n:-0}" -gt 0 ] || die "$test: no test ran"
	echo "$what: $n tests passed"
	echo "$n 0 $result" >"$BUILD/results/$result.txt"
}
py_tests test_guestlog.py host-guestlog "guestlog.py checker"
py_tests test_compare_stacks.py host-compare "compare-stacks.py (differential check)"
py_tests test_compare_real.py host-compare-real \
	"compare-real.py (real programs, table walk vs DWARF)"
py_tests test_stack_depth.py host-stack-depth \
	"stack-depth.py (worst stack of the unwinder's paths)"
py_tests test_bench_tables.py host-bench-tables \
	"bench_tables.py (the benchmark tables of the README and docs)"
# The README's and docs/benchmarks.md's benchmark tables are generated
# from docs/bench.json: a hand edit, a missing marker or table, a missing
# docs/bench.json or a docs/bench.csv of another run fails (with a diff).
python3 "$TOP/scripts/bench_tables.py" --check ||
	die "benchmark tables: README.md or docs/ differ from docs/bench.json (see above)"
echo "1 0 host-bench-docs" >"$BUILD/results/host-bench-docs.txt"

# The unwinder's kernel-independent rules (src/logic), on the host.
cd "$TOP"
# Before make check's builds: the gimli oracle (cfi_oracle) reports perf
# and the vDSOs as SKIP here; make check's host-oracle stage
# (scripts/host-oracle.sh) runs it after the builds with them required.
export UNWIND_ORACLE_BUILT=0
out=$(cargo test --release 2>&1) || { echo "$out" | tail -40; die "cargo test failed"; }
echo "$out" | grep -E '^test result|Running' | sed 's/^/  /'
# The oracle's SKIPs and totals, said (cargo test hides a passing test's
# output).
cargo test --release --test cfi_oracle -- --nocapture 2>&1 |
	grep -E '^cfi oracle: (SKIP|[0-9]+ objects checked)' | sed 's/^/  /' ||
	die "cfi oracle: no summary"
p=$(echo "$out" | awk '/^test result:/ { s += $4 } END { print s + 0 }')
# A run that executed no test proves nothing.
[ "${p:-0}" -gt 0 ] || die "cargo test ran no test"
echo "${p:-0} 0 host-cargo-test" >"$BUILD/results/host-cargo-test.txt"

# Under the loom model checker: the request bitmask protocol, the cookie
# claim, and a callback bit's reuse after cancel (each a few seconds; the
# #[should_panic] tests are mutated protocols loom must catch).
out=$(RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR="$TOP/target/loom" \
	cargo test --release --test loom_mask --test loom_cookie \
	--test loom_registry -- --nocapture 2>&1) ||
	{ echo "$out" | tail -40; die "loom model check failed"; }
echo "$out" | grep -oE 'loom: .*|^test result.*' | sed 's/^/  /'
p=$(echo "$out" | awk '/^test result:/ { s += $4 } END { print s + 0 }')
# Each of the three model binaries must have run tests of its own.
runs=$(echo "$out" | awk '/^test result:/ && $4 > 0 { n++ } END { print n + 0 }')
[ "$runs" -eq 3 ] || die "loom: $runs of 3 model binaries ran a test"
echo "${p:-0} 0 host-loom" >"$BUILD/results/host-loom.txt"

# rustfmt, with the kernel's .rustfmt.toml (a copy is at the top level).
files=$(cd "$TOP" && git ls-files '*.rs')
(cd "$TOP" && rustfmt --edition 2021 --check $files) >/dev/null ||
	die "rustfmt: run 'rustfmt --edition 2021 \$(git ls-files \"*.rs\")'"
echo "rustfmt: $(echo "$files" | wc -l) files clean"
