# SPDX-License-Identifier: GPL-2.0
# Shared helpers for the host-side pipeline scripts.  Sourced, not run.

set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
# Downloads survive fresh clones on the same machine (CI clones anew).
CACHE=${UNWIND_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/unwind-rs}
LLVM_SUFFIX=${LLVM_SUFFIX:--19}
# make bench's kernels: rustc's LLVM (see build-kernel.sh).
BENCH_LLVM_SUFFIX=${BENCH_LLVM_SUFFIX:--22}

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# stage NAME CMD...: run a stage and print how long it took.
stage() {
	local name=$1 t0 rc
	shift
	t0=$(date +%s)
	log "== $name"
	rc=0
	"$@" || rc=$?
	printf 'STAGE %-28s %4ds %s\n' "$name" $(( $(date +%s) - t0 )) \
		"$([ $rc -eq 0 ] && echo ok || echo FAILED)" | tee -a "$BUILD/stages.txt" >&2
	return $rc
}

# stage_project_files DIR: the project's new files into the kernel tree
# (or a scratch copy of it) at DIR: arch/ include/ kernel/ rust/ tools/
# to the same paths, src/ and Kbuild to kernel/unwind/rust/.
stage_project_files() {
	local dir=$1 d
	for d in arch include kernel rust tools; do
		[ -d "$TOP/$d" ] && rsync -a "$TOP/$d/" "$dir/$d/"
	done
	if [ -d "$TOP/src" ]; then
		mkdir -p "$dir/kernel/unwind/rust"
		rsync -a --exclude='*.md' "$TOP/src/" "$dir/kernel/unwind/rust/"
		[ -f "$TOP/Kbuild" ] && cp "$TOP/Kbuild" "$dir/kernel/unwind/rust/Kbuild"
	fi
	return 0
}

# re_quote STR: STR as an extended regular expression matching itself.
re_quote() { printf '%s' "$1" | sed 's/[][\\.*^$+?(){}|/]/\\&/g'; }
