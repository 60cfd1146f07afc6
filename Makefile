# SPDX-License-Identifier: GPL-2.0
#
# Deferred user-space unwinding in Rust, on Linux 7.3.
#
#   make demo    the main job: build, boot the custom kernel, profile a
#                workload with `perf record --call-graph fp,defer`, print
#                merged stacks and record counts
#   make check   every test: build the kernels, run KUnit and the
#                selftests (raw perf_event_open and the perf tool) in QEMU
#
# Both set up the machine first (scripts/setup.sh, idempotent).  Outputs
# go to build/ (BUILD=...), downloads to ~/.cache/unwind-rs.

S := scripts/stage.sh
BUILD ?= $(CURDIR)/build
export BUILD

# The guest programs that `make check` requires (in /tests/list order).
SELFTESTS := deferred_task perf_defer.sh
KUNIT_SUITES := example rust_doctests_kernel

.PHONY: all demo check setup source overlay kernel-c perf initramfs \
	guest-test-c guest-demo-c host-test diff clean distclean timings

all: demo

setup:
	@$(S) setup scripts/setup.sh
source: setup
	@$(S) source scripts/fetch-source.sh
overlay: source
	@$(S) overlay scripts/overlay.sh
kernel-c: overlay
	@$(S) kernel-c scripts/build-kernel.sh c
perf: overlay
	@$(S) perf scripts/build-perf.sh
initramfs: kernel-c perf
	@$(S) initramfs scripts/build-initramfs.sh

guest-test-c: kernel-c initramfs
	@$(S) guest-test-c scripts/run-guest.sh c test guest $(SELFTESTS) \
		$(addprefix --kunit-suite=,$(KUNIT_SUITES))

demo:
	@mkdir -p $(BUILD) && rm -f $(BUILD)/stages.txt
	@$(MAKE) -s guest-demo-c
	@sed -n '/==== BEGIN demo/,/==== END demo/p' $(BUILD)/logs/c-demo.log
	@$(MAKE) -s timings

guest-demo-c: kernel-c initramfs
	@$(S) guest-demo-c scripts/run-guest.sh c demo

check:
	@mkdir -p $(BUILD) && rm -rf $(BUILD)/stages.txt $(BUILD)/results
	@$(MAKE) -s host-test
	@$(MAKE) -s guest-test-c
	@$(MAKE) -s timings
	@scripts/summary.sh

# Tests that need no kernel.
host-test: setup
	@$(S) host-test scripts/host-test.sh

timings:
	@echo "== stage timings"; cat $(BUILD)/stages.txt 2>/dev/null || true

# The whole change to upstream, for review.
diff: overlay
	@git -C $(BUILD)/linux diff pristine

clean:
	rm -rf $(BUILD)/kernel-* $(BUILD)/perf $(BUILD)/selftests \
		$(BUILD)/initramfs* $(BUILD)/logs
distclean:
	rm -rf $(BUILD)
