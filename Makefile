# SPDX-License-Identifier: GPL-2.0
#
# Deferred user-space unwinding in Rust, on Linux 7.3.
#
#   make demo    the main job: build, boot the Rust-unwinder kernel, profile
#                a workload with `perf record --call-graph fp,defer`, print
#                merged stacks and record counts, draw the merged stacks as
#                a flame graph (build/demo/flamegraph.svg, inferno)
#   make check   every test: host tests, both kernels (upstream C and Rust),
#                KUnit and the selftests (raw perf_event_open and the perf
#                tool) in QEMU on each
#   make bench   micro-benchmarks, Rust vs upstream C, under QEMU -icount
#                (after make check: reuses its perf and initramfs)
#   make bench-docs  the latest make bench run into docs/ and the README's
#                and docs/benchmarks.md's generated tables
#   make upstream-fixes  the upstream fix series (patches/upstream/) on the
#                C kernel: it applies, passes checkpatch, builds, and the
#                reproducers of the upstream bugs pass (in make check-full)
#
# Both set up the machine first (scripts/setup.sh, idempotent).  Outputs
# go to build/ (BUILD=...), downloads to ~/.cache/unwind-rs.

S := scripts/stage.sh
comma := ,
space := $(subst ,, )
BUILD ?= $(CURDIR)/build
export BUILD
DEMO_VARIANT ?= rust

# The guest programs that `make check` requires (in /tests/list order).
SELFTESTS := deferred_task deferred_task_32 deferred_entry deferred_threads \
	deferred_cpu deferred_cpu_bare deferred_sessions deferred_exit \
	deferred_lost deferred_nmi deferred_failslab deferred_races deferred_stress \
	deferred_bench deferred_bench_32 deferred_hostile deferred_hostile_32 \
	deferred_tables deferred_tables_32 deferred_tables_fp deferred_tables_fp_32 \
	deferred_hostile_tables deferred_tables_cache deferred_tables_signal \
	deferred_tables_signal_32 deferred_mtexec deferred_iouring perf_defer.sh
export SELFTESTS
# The real programs (perl, gzip, bzip2, grep) under perf's DWARF unwinder
# and the table walk: on the Rust kernels in make check (about 100 s of
# guest time on rust, 50 s on rust-debug, which runs the walk alone), on
# the C kernels too in make check-full.
REAL_SELFTESTS := perf_real.sh
# The guest's test list: every test a run may ask for (a run leaves out
# what it does not: C_SKIP, comma-separated).
GUEST_TESTS = $(SELFTESTS) $(filter-out $(SELFTESTS),$(REAL_SELFTESTS))
C_SKIP ?= $(REAL_SELFTESTS)
# Tests that must fail on the upstream C kernel: the upstream 7.3 bugs the
# Rust kernel fixes (see docs/deviations.md), each with its bug's token:
# guestlog.py counts them as passed when they fail there and the test
# printed "# upstream bug: TOKEN" (it recognised the bug's signature), as
# failed if they pass or fail without it.
XFAIL_c := deferred_exit:2:exit-loss deferred_cpu_bare:2:sb-defer-output \
	deferred_cpu_bare:3:sb-defer-output deferred_cpu_bare:4:sb-defer-output
# Tests that may report SKIP on the test kernels (SLUB_TINY: no slab
# statistics), and only there: deferred_stress's kmalloc-4k count runs on
# the debug kernels (SLUB_DEBUG).
SKIP_nodebug := deferred_stress:8
# Tests that report SKIP on the upstream C kernels (c, c-debug), and only
# there: deferred_tables_cache tests the Rust unwinder's per-mm row cache,
# perf_real.sh's test 1 compares the table walk with perf's DWARF unwinder,
# and deferred_tables_signal's table tests need the table walk; C has none
# of them (on Rust, a missing tables switch fails instead).  The cache
# test's count of results is read from its NR_RESULTS.
NR_CACHE_RESULTS := $(shell sed -n 's/^\#define NR_RESULTS[[:space:]]*\([0-9]*\).*/\1/p' \
	tools/testing/selftests/unwind_deferred/deferred_tables_cache.c)
SKIP_c := $(foreach n,$(shell seq 1 $(NR_CACHE_RESULTS)),deferred_tables_cache:$(n)) perf_real.sh:1 \
	$(foreach n,2 3 5 6 8 9,deferred_tables_signal:$(n)) \
	$(foreach n,2 3 5 6,deferred_tables_signal_32:$(n))
# The real programs perf_real.sh profiles on the Rust kernels, compared
# on the host by scripts/compare-real.py (make real-programs).
REAL_COMPARED := perl gzip bzip2 grep python3.11
KUNIT_SUITES := example rust_doctests_kernel
KUNIT_SUITES_rust := unwind_rust_walk unwind_rust_cookie unwind_rust_deferred \
	unwind_rust_tables
# What `make check` must have produced results for (a missing one fails).
CHECK_RESULTS := host-guestlog host-compare host-compare-real host-stack-depth \
	host-bench-tables host-bench-docs host-cargo-test \
	host-loom host-oracle c-test rust-test rust-debug-test symbols differential real-programs
# make check-full adds the upstream fix series on the C kernel (make
# upstream-fixes) and the upstream-C debug kernel.
CHECK_FULL_RESULTS := $(CHECK_RESULTS) upstream-series c-fixed-test c-fixed-excuses \
	c-debug-test rust-la57-test rust-defconfig-test real-programs-defconfig

.PHONY: all demo check check-full bench bench-docs kernel-c-debug kernel-rust-debug \
	guest-test-c-debug guest-test-rust-debug guest-test-rust-la57 \
	kernel-rust-defconfig guest-test-rust-defconfig real-programs-defconfig setup source overlay kernel-c kernel-rust perf \
	initramfs guest-test-c guest-test-rust guest-demo symbols differential \
	real-programs host-test host-oracle diff clean distclean timings upstream-fixes \
	upstream-fixes-debug

all: demo

setup:
	@$(S) setup scripts/setup.sh
source: setup
	@$(S) source scripts/fetch-source.sh
overlay: source
	@$(S) overlay scripts/overlay.sh
# One kernel build at a time: the machine has two cores.
kernel-c: overlay
	@$(S) kernel-c scripts/build-kernel.sh c
kernel-rust: overlay | kernel-c
	@$(S) kernel-rust scripts/build-kernel.sh rust
# A distribution-sized kernel: x86_64_defconfig, not tinyconfig, + Rust
# and the Rust unwinder with tables (make check-full).
kernel-rust-defconfig: overlay | kernel-rust
	@$(S) kernel-rust-defconfig scripts/build-kernel.sh rust-defconfig
# Debug kernels (KASAN, kmemleak, UBSAN, KFENCE, lockdep, debug objects,
# failslab): rust-debug in make check, c-debug in make check-full.
kernel-rust-debug: overlay | kernel-rust
	@$(S) kernel-rust-debug scripts/build-kernel.sh rust-debug
kernel-c-debug: overlay | kernel-rust-debug
	@$(S) kernel-c-debug scripts/build-kernel.sh c-debug
perf: overlay
	@$(S) perf scripts/build-perf.sh
initramfs: kernel-c perf
	@SELFTESTS="$(GUEST_TESTS)" $(S) initramfs scripts/build-initramfs.sh

# (Explicit targets: make does not apply pattern rules to .PHONY ones.)
guest-test-c: kernel-c initramfs
	@GUEST_APPEND="skip=$(C_SKIP) $${GUEST_APPEND:-}" $(S) guest-test-c scripts/run-guest.sh c test guest $(SELFTESTS) \
		$(addprefix --kunit-suite=,$(KUNIT_SUITES)) \
		$(addprefix --xfail=,$(XFAIL_c)) $(addprefix --skip=,$(SKIP_nodebug) $(SKIP_c))
guest-test-rust: kernel-rust initramfs
	@$(S) guest-test-rust scripts/run-guest.sh rust test guest $(SELFTESTS) $(REAL_SELFTESTS) \
		$(addprefix --kunit-suite=,$(KUNIT_SUITES) $(KUNIT_SUITES_rust)) \
		$(addprefix --skip=,$(SKIP_nodebug))

# The debug kernels run slower (KASAN): a longer guest timeout.  The run
# ends with a kmemleak scan (section kmemleak, required).
guest-test-rust-debug: kernel-rust-debug initramfs
	@GUEST_TIMEOUT=1800 $(S) guest-test-rust-debug scripts/run-guest.sh rust-debug test \
		guest $(SELFTESTS) $(REAL_SELFTESTS) kmemleak \
		$(addprefix --kunit-suite=,$(KUNIT_SUITES) $(KUNIT_SUITES_rust))
guest-test-c-debug: kernel-c-debug initramfs
	@GUEST_TIMEOUT=1800 $(S) guest-test-c-debug scripts/run-guest.sh c-debug test \
		guest $(SELFTESTS) kmemleak \
		$(addprefix --kunit-suite=,$(KUNIT_SUITES)) \
		$(addprefix --xfail=,$(XFAIL_c)) $(addprefix --skip=,$(SKIP_c))

# 5-level paging (QEMU's -cpu max has LA57; the default CPU has not):
# guest-test-rust's whole suite again, where TASK_SIZE_MAX is
# 0x00fffffffffff000 (the selftests probe it: dc_user_max()); the run
# fails unless deferred_hostile saw that bound.  In make check-full.
guest-test-rust-la57: kernel-rust initramfs
	@QEMU_EXTRA="-cpu max $${QEMU_EXTRA:-}" GUEST_RUN=rust-la57-test \
		$(S) guest-test-rust-la57 scripts/run-guest.sh rust test guest \
		$(SELFTESTS) $(REAL_SELFTESTS) \
		$(addprefix --kunit-suite=,$(KUNIT_SUITES) $(KUNIT_SUITES_rust)) \
		$(addprefix --skip=,$(SKIP_nodebug)) \
		--require-line="user addresses below 0xfffffffffff000"

# The distribution-sized kernel (#17 item 7): the selftests and the real
# programs (whose log real-programs-defconfig compares with perf's DWARF
# unwinder), but for what x86_64_defconfig cannot run (DEFCONFIG_SKIP,
# not run): the tests of the test driver (CONFIG_UNWIND_DEFERRED_TEST)
# and of failslab.  deferred_hostile_32's ldt_atomic (the test driver's)
# reports SKIP.  No KUnit in this kernel.  In make check-full.
DEFCONFIG_SKIP := deferred_nmi deferred_failslab deferred_bench deferred_bench_32
guest-test-rust-defconfig: kernel-rust-defconfig initramfs
	@GUEST_KUNIT=0 GUEST_APPEND="skip=$(subst $(space),$(comma),$(DEFCONFIG_SKIP)) $${GUEST_APPEND:-}" \
		$(S) guest-test-rust-defconfig scripts/run-guest.sh rust-defconfig test guest \
		$(filter-out $(DEFCONFIG_SKIP),$(SELFTESTS)) $(REAL_SELFTESTS) \
		--skip=deferred_hostile_32:19
real-programs-defconfig:
	@$(S) real-programs-defconfig scripts/compare-real.py \
		$(BUILD)/logs/rust-defconfig-test.log \
		--root $(BUILD)/initramfs $(addprefix --program ,$(REAL_COMPARED)) \
		--results $(BUILD)/results/real-programs-defconfig.txt

# The upstream fix series (patches/upstream/, one C patch per upstream
# 7.3 bug of README's "Deviations") on the C kernel: upstream-fixes.sh
# applies it to pristine 7.3 (git am, patch by patch) and runs checkpatch,
# then builds c-fixed, the c kernel with the series under the overlay.
# Its guest runs guest-test-c's selftests without --xfail: the
# reproducers that fail on c must pass there.  The selftests excuse
# upstream's bugs on any variant=c...; check-log requires those excuses
# to count nothing.  A third kernel build: in make check-full, not in
# make check.  upstream-fixes-debug does the same under c-debug's
# configuration (UBSAN: deferred_nmi test 5's report on c-debug is
# upstream's cancel race); it is in neither.
upstream-fixes: initramfs
	@$(S) kernel-c-fixed scripts/upstream-fixes.sh build c-fixed
	@GUEST_APPEND="skip=$(REAL_SELFTESTS) $${GUEST_APPEND:-}" $(S) guest-test-c-fixed \
		scripts/run-guest.sh c-fixed test guest $(SELFTESTS) \
		$(addprefix --kunit-suite=,$(KUNIT_SUITES)) \
		$(addprefix --skip=,$(SKIP_nodebug) $(SKIP_c))
	@$(S) c-fixed-excuses scripts/upstream-fixes.sh check-log $(BUILD)/logs/c-fixed-test.log
upstream-fixes-debug: initramfs
	@$(S) kernel-c-fixed-debug scripts/upstream-fixes.sh build c-fixed-debug
	@GUEST_TIMEOUT=1800 GUEST_APPEND="skip=$(REAL_SELFTESTS) $${GUEST_APPEND:-}" \
		$(S) guest-test-c-fixed-debug scripts/run-guest.sh c-fixed-debug \
		test guest $(SELFTESTS) kmemleak \
		$(addprefix --kunit-suite=,$(KUNIT_SUITES)) $(addprefix --skip=,$(SKIP_c))
	@$(S) c-fixed-debug-excuses scripts/upstream-fixes.sh check-log \
		$(BUILD)/logs/c-fixed-debug-test.log

guest-demo: kernel-$(DEMO_VARIANT) initramfs
	@$(S) guest-demo-$(DEMO_VARIANT) scripts/run-guest.sh $(DEMO_VARIANT) demo

# No code of the C implementation in the Rust kernel; the Rust unwinder's
# worst stack use within its limits (both Rust test kernels).
symbols: kernel-c kernel-rust kernel-rust-debug
	@$(S) symbols scripts/check-symbols.sh

# The same perf sessions give the same merged user stacks on both kernels
# (reads the logs of guest-test-c and guest-test-rust; run those first).
differential:
	@$(S) differential scripts/compare-stacks.py $(BUILD)/logs/c-test.log \
		$(BUILD)/logs/rust-test.log --session perf-task --session perf-all \
		--results $(BUILD)/results/differential.txt

# Debian's programs without frame pointers: the Rust kernel's table walk
# against perf's own DWARF unwinder, step by step (reads the log of
# guest-test-rust and the objects of the initramfs it ran; the debug
# kernel runs the walk alone on each program, under KASAN and lockdep).
real-programs:
	@$(S) real-programs scripts/compare-real.py $(BUILD)/logs/rust-test.log \
		--root $(BUILD)/initramfs $(addprefix --program ,$(REAL_COMPARED)) \
		--results $(BUILD)/results/real-programs.txt

# Rust vs C, timed under QEMU -icount (its own kernels: no lockdep).
bench: initramfs
	@mkdir -p $(BUILD) && rm -f $(BUILD)/stages.txt
	@$(S) bench scripts/bench.sh
	@$(MAKE) -s timings

# The latest make bench run into docs/ (bench.json, bench.csv, the charts)
# and the README's and docs/benchmarks.md's generated tables; nothing is
# copied if the run lacks a table's figures.
bench-docs:
	@python3 scripts/bench_tables.py --publish $(BUILD)/bench

# Tests that need no kernel.  The gimli oracle skips perf and the vDSOs
# here (UNWIND_ORACLE_BUILT=0): they are not built yet on a fresh clone.
host-test: setup
	@$(S) host-test scripts/host-test.sh
# The gimli oracle again, with the objects the builds made required: perf
# and the vDSOs of kernel-c and kernel-rust, a missing one fails (run it
# after those builds: make check runs it after guest-test-rust).
host-oracle:
	@$(S) host-oracle scripts/host-oracle.sh

demo:
	@mkdir -p $(BUILD) && rm -f $(BUILD)/stages.txt
	@$(MAKE) -s guest-demo
	@sed -n '/==== BEGIN demo/,/==== END demo/{/^#### BEGIN perf-script/,/^#### END perf-script/d;p}' \
		$(BUILD)/logs/$(DEMO_VARIANT)-demo.log
	@$(S) flamegraph scripts/flamegraph.sh $(BUILD)/logs/$(DEMO_VARIANT)-demo.log \
		$(BUILD)/demo
	@$(MAKE) -s timings

check:
	@mkdir -p $(BUILD) && rm -rf $(BUILD)/stages.txt $(BUILD)/results
	@$(MAKE) -s host-test
	@$(MAKE) -s guest-test-c
	@$(MAKE) -s guest-test-rust
	@$(MAKE) -s host-oracle
	@$(MAKE) -s guest-test-rust-debug
	@$(MAKE) -s symbols
	@$(MAKE) -s differential
	@$(MAKE) -s real-programs
	@$(MAKE) -s timings
	@scripts/summary.sh $(CHECK_RESULTS)

# make check, plus the upstream fix series (before c-debug, which stops at
# upstream's UBSAN report) and the upstream C kernel under the same debug
# options.
check-full:
	@mkdir -p $(BUILD) && rm -rf $(BUILD)/stages.txt $(BUILD)/results
	@$(MAKE) -s host-test
	@$(MAKE) -s guest-test-c SELFTESTS="$(SELFTESTS) $(REAL_SELFTESTS)" C_SKIP=
	@$(MAKE) -s guest-test-rust
	@$(MAKE) -s host-oracle
	@$(MAKE) -s guest-test-rust-debug
	@$(MAKE) -s guest-test-rust-la57
	@$(MAKE) -s guest-test-rust-defconfig
	@$(MAKE) -s real-programs-defconfig
	@$(MAKE) -s upstream-fixes
	@$(MAKE) -s guest-test-c-debug SELFTESTS="$(SELFTESTS) $(REAL_SELFTESTS)"
	@$(MAKE) -s symbols
	@$(MAKE) -s differential
	@$(MAKE) -s real-programs
	@$(MAKE) -s timings
	@scripts/summary.sh $(CHECK_FULL_RESULTS)

timings:
	@echo "== stage timings"; cat $(BUILD)/stages.txt 2>/dev/null || true

# The whole change to upstream, for review.
diff: overlay
	@git -C $(BUILD)/linux diff pristine

clean:
	rm -rf $(BUILD)/kernel-* $(BUILD)/perf $(BUILD)/selftests $(BUILD)/demo \
		$(BUILD)/initramfs* $(BUILD)/logs $(BUILD)/results
distclean:
	rm -rf $(BUILD)
