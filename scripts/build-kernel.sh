#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# build-kernel.sh VARIANT: configure and build the test kernel.
#   c     upstream C unwinder (the baseline)
#   rust  the project's Rust unwinder (CONFIG_UNWIND_USER_RUST=y)
#   c-bench, rust-bench  the same for make bench: no lockdep, no KUnit
#         (arch/x86/configs/unwind_bench.config)
#   c-debug, rust-debug  the test kernels with KASAN, kmemleak, UBSAN,
#         KFENCE, debug objects and the hang detectors
#         (arch/x86/configs/unwind_debug.config)
#   c-fixed, c-fixed-debug  c and c-debug with the upstream fix series
#         (patches/upstream/); scripts/upstream-fixes.sh build calls this
#   rust-defconfig  a distribution-sized kernel: x86_64_defconfig (not
#         tinyconfig) + Rust + the Rust unwinder with tables
#         (arch/x86/configs/unwind_defconfig.config), no test options
# The C kernels c, c-bench and c-debug build from $BUILD/linux, pristine
# 7.3 + the project (upstream's own unwinder: the reference); the Rust
# kernels and c-fixed from $BUILD/linux-fixed, pristine 7.3 + the fix
# series + the project (both trees made by overlay.sh).
# Output in $BUILD/kernel-VARIANT (O= build, the source tree stays clean).
# The configuration is tinyconfig + arch/x86/configs/unwind_test.config +
# kunit/.kunitconfig (+ unwind_rust.config), rust-defconfig's
# x86_64_defconfig + unwind_defconfig.config; every value the fragments
# ask for is checked to have made it into .config.  A compiler (or, for the Rust
# kernel, clippy) warning fails the build.

. "$(dirname "$0")/lib.sh"

variant=${1:?usage: build-kernel.sh c|rust|c-bench|rust-bench|c-debug|rust-debug|c-fixed|c-fixed-debug|rust-defconfig}
SRC=$BUILD/linux
case $variant in
c-fixed* | rust*)
	SRC=$BUILD/linux-fixed
	[ -d "$SRC" ] || die "no $SRC: run scripts/overlay.sh"
	;;
esac
O=$BUILD/kernel-$variant
base=tinyconfig
# Kbuild's dependency files name the source tree's files: objects built
# from another tree would pass for up to date.  A build directory is for
# one tree; one made from another is emptied first.
if [ -d "$O" ] && [ "$(cat "$O/.srctree" 2>/dev/null)" != "$SRC" ]; then
	log "kernel-$variant: $O was not built from $SRC: starting afresh"
	rm -rf "$O"
fi
mkdir -p "$O"
echo "$SRC" >"$O/.srctree"
case $variant in
c | c-fixed)
	# Upstream C: the KUnit options without the Rust unwinder's.
	grep -v UNWIND_USER_RUST "$TOP/kunit/.kunitconfig" >"$O/kunit.config"
	frags=("$TOP/arch/x86/configs/unwind_test.config" "$O/kunit.config")
	;;
rust)
	frags=("$TOP/arch/x86/configs/unwind_test.config" "$TOP/kunit/.kunitconfig"
		"$TOP/arch/x86/configs/unwind_rust.config")
	;;
c-bench)
	frags=("$TOP/arch/x86/configs/unwind_test.config"
		"$TOP/arch/x86/configs/unwind_bench.config")
	;;
rust-bench)
	frags=("$TOP/arch/x86/configs/unwind_test.config"
		"$TOP/arch/x86/configs/unwind_bench.config"
		"$TOP/arch/x86/configs/unwind_rust.config")
	;;
c-debug | c-fixed-debug)
	grep -v UNWIND_USER_RUST "$TOP/kunit/.kunitconfig" >"$O/kunit.config"
	frags=("$TOP/arch/x86/configs/unwind_test.config" "$O/kunit.config"
		"$TOP/arch/x86/configs/unwind_debug.config")
	;;
rust-defconfig)
	base=x86_64_defconfig
	frags=("$TOP/arch/x86/configs/unwind_defconfig.config")
	;;
rust-debug)
	frags=("$TOP/arch/x86/configs/unwind_test.config" "$TOP/kunit/.kunitconfig"
		"$TOP/arch/x86/configs/unwind_rust.config"
		"$TOP/arch/x86/configs/unwind_debug.config"
		"$TOP/arch/x86/configs/unwind_rust_debug.config")
	;;
*) die "unknown variant $variant" ;;
esac

# The benchmark kernels are built by the clang whose LLVM is rustc's (22
# for rustc 1.95), so that CONFIG_RUST_INLINE_HELPERS can inline the C
# helpers into Rust code: both of them, so the C baseline gets the same
# compiler.  The test kernels stay on $LLVM_SUFFIX.
case $variant in *-bench) LLVM_SUFFIX=$BENCH_LLVM_SUFFIX ;; esac
# bindgen (libclang at run time) from the same LLVM as the compiler.
export LIBCLANG_PATH=/usr/lib/llvm-${LLVM_SUFFIX#-}/lib

RUST_LIB_SRC=$CACHE/rust-src-$(rustc --version | awk '{print $2}')/library
[ -d "$RUST_LIB_SRC" ] || die "no Rust library source at $RUST_LIB_SRC: run scripts/setup.sh"
export RUST_LIB_SRC
# The Rust kernel is built with clippy as the Rust compiler, so that a
# clippy warning fails the build like any other warning.
clippy=
case $variant in rust*) clippy=CLIPPY=1 ;; esac
kmake() { make -C "$SRC" O="$O" LLVM="$LLVM_SUFFIX" $clippy -j"$(nproc)" "$@"; }

mkdir -p "$O"
# Reconfigure when the fragments changed, or when the .config is not the
# one this script made and checked (a hand-run make can rewrite it: without
# RUST_LIB_SRC, Kconfig silently drops CONFIG_RUST).
sum=$({ echo "$base"; cat "${frags[@]}"; } | sha256sum | awk '{print $1}')
cfgsum() { sha256sum <"$O/.config" | awk '{print $1}'; }
if [ ! -f "$O/.config" ] || [ "$(cat "$O/.fragments-sha" 2>/dev/null)" != "$sum $(cfgsum)" ]; then
	log "kernel-$variant: configuring"
	kmake -s rustavailable >/dev/null || die "Rust is not available to Kbuild (make rustavailable)"
	kmake -s "$base" >/dev/null
	"$SRC/scripts/kconfig/merge_config.sh" -m -O "$O" "$O/.config" "${frags[@]}" >"$O/merge.log"
	kmake -s olddefconfig >/dev/null
	# Every CONFIG_X=v (and "# CONFIG_X is not set") asked for must hold;
	# a later fragment overrides an earlier one.
	bad=0
	while IFS= read -r line; do
		case $line in
		CONFIG_*=n) want="# ${line%%=*} is not set" ;;
		CONFIG_*) want=$line ;;
		*) continue ;;
		esac
		if ! grep -qxF -- "$want" "$O/.config"; then
			if [ "${line#*=}" = n ] && ! grep -q "^${line%%=*}=" "$O/.config"; then
				continue
			fi
			echo "config: asked for '$line', got '$(grep "^${line%%=*}=\|${line%%=*} is not" "$O/.config" || echo unset)'" >&2
			bad=1
		fi
	done < <(cat "${frags[@]}" | grep '^CONFIG_' |
		awk -F= '{ v[$1] = $0; if (!($1 in o)) o[$1] = n++ }
			END { for (k in v) print o[k], v[k] }' | sort -n | cut -d' ' -f2-)
	[ $bad -eq 0 ] || die "kernel-$variant: configuration does not hold (see above)"
	echo "$sum $(cfgsum)" >"$O/.fragments-sha"
fi

# Kbuild relinks vmlinux on every run (a minute each); skip the whole
# build when neither the tree (pristine + overlay, as staged by
# overlay.sh), nor the .config, nor the toolchain changed since the last
# successful one.  The selftests (tools/) are not part of the kernel.
stamp=$({
	git -C "$SRC" diff --cached pristine -- . ':!tools'
	cat "$O/.config"
	echo "$clippy $(rustc --version) $(clang$LLVM_SUFFIX --version | head -1)"
} | sha256sum | awk '{print $1}')
if [ -f "$O/arch/x86/boot/bzImage" ] && [ "$(cat "$O/.build-stamp" 2>/dev/null)" = "$stamp" ]; then
	log "kernel-$variant: up to date ($O/arch/x86/boot/bzImage)"
	exit 0
fi
rm -f "$O/.build-stamp"

log "kernel-$variant: building"
set +e
kmake bzImage 2>&1 | tee "$O/build.log" | grep -E 'warning:|error:|^make.*Error' >&2
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || die "kernel-$variant: build failed (log: $O/build.log)"
nwarn=$(grep -c 'warning:' "$O/build.log" || true)
[ "$nwarn" -eq 0 ] || die "kernel-$variant: $nwarn compiler warning(s) (log: $O/build.log)"
echo "$stamp" >"$O/.build-stamp"
log "kernel-$variant: $O/arch/x86/boot/bzImage"
