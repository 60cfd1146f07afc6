#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build the perf tool from the same kernel tree, optional features off.
. "$(dirname "$0")/lib.sh"
SRC=$BUILD/linux
O=$BUILD/perf
mkdir -p "$O"
if [ -x "$O/perf" ] && [ -z "$(find "$SRC/tools/perf" "$SRC/tools/lib" "$SRC/tools/include" -newer "$O/perf" -print -quit)" ]; then
	log "perf: up to date ($O/perf)"
	exit 0
fi
log "perf: building"
make -s -C "$SRC/tools/perf" O="$O" -j"$(nproc)" \
	NO_LIBPYTHON=1 NO_LIBPERL=1 NO_SLANG=1 NO_GTK2=1 NO_LIBBPF=1 \
	NO_BPF_SKEL=1 NO_LIBUNWIND=1 NO_LIBNUMA=1 NO_LIBBABELTRACE=1 \
	NO_LIBCRYPTO=1 NO_LIBLLVM=1 NO_LIBCAPSTONE=1 NO_SDT=1 NO_AUXTRACE=1 \
	NO_LIBPFM4=1 NO_JEVENTS=1 NO_RUST=1 NO_LIBCAP=1 NO_SHELLCHECK=1 NO_LIBDEBUGINFOD=1 \
	WERROR=0 >"$O/build.log" 2>&1 || { tail -30 "$O/build.log"; die "perf build failed"; }
"$O/perf" version
