#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Apply the project to the pristine kernel tree, twice:
#
#   $BUILD/linux        pristine 7.3 + the project: the C kernels' tree
#                       (c, c-debug, c-bench), whose unwinder and perf glue
#                       are upstream's, unchanged, the reference;
#   $BUILD/linux-fixed  pristine 7.3 + the upstream fix series
#                       (patches/upstream/) + the project: the Rust kernels'
#                       tree (rust, rust-debug, rust-bench), and c-fixed's.
#
# The project is
#   arch/ include/ kernel/ rust/ tools/ -> the same paths in the tree (new files)
#   src/ and Kbuild              -> kernel/unwind/rust/ (the Rust unwinder)
#   patches/*.patch              -> the small changes to upstream files
# and each of its patches must apply without fuzz to both trees: the Rust
# series is the same change on pristine 7.3 and on 7.3 with the fixes, so
# `git -C build/linux diff pristine` (make diff) is the whole Rust series,
# and the fixes the Rust kernel needs in upstream's code (the exit order,
# is_sb_event()) come from the C series, not from Rust-gated hooks.
#
# Idempotent and cheap: each target file is computed in a scratch tree
# (pristine [+ series] + patches, then the copied files) and written only
# if its content differs, so unchanged files keep their mtime and nothing
# is rebuilt needlessly.  Files a previous overlay installed that the
# project no longer has are restored to pristine (or removed).  The result
# is staged in the tree's git index, so `git diff --cached pristine` in a
# tree is the whole change against upstream (build-kernel.sh's up-to-date
# stamp reads it).  $BUILD/linux-fixed is a git worktree of $BUILD/linux,
# detached at pristine.

. "$(dirname "$0")/lib.sh"

SRC=$BUILD/linux
FIX=$BUILD/linux-fixed
[ -d "$SRC/.git" ] || die "no kernel tree in $SRC: run scripts/fetch-source.sh"
git -C "$SRC" rev-parse -q --verify pristine >/dev/null || die "$SRC has no 'pristine' tag"

patches=()
for p in "$TOP"/patches/*.patch; do
	[ -e "$p" ] && patches+=("$p")
done
series=()
for p in "$TOP"/patches/upstream/*.patch; do
	[ -e "$p" ] && series+=("$p")
done

stage_dir=
trap 'rm -rf "$stage_dir" "$stage_dir.manifest"' EXIT

# overlay_tree TREE SERIES...: make TREE pristine + SERIES + the project.
overlay_tree() {
	local tree=$1 files p old changed
	shift

	stage_dir=$(mktemp -d "$BUILD/.overlay.XXXXXX")

	# 1. Upstream files touched by the series or the patches, patched in
	# the scratch tree: the series first, then the project's patches,
	# neither with fuzz.
	files=$(cat "$@" "${patches[@]}" /dev/null | sed -n 's|^+++ b/||p' | sort -u)
	if [ -n "$files" ]; then
		# shellcheck disable=SC2086
		git -C "$SRC" archive pristine -- $files | tar -x -C "$stage_dir"
	fi
	for p in "$@"; do
		patch -d "$stage_dir" -p1 --batch --quiet --fuzz=0 --no-backup-if-mismatch <"$p" ||
			die "the upstream fix $(basename "$p") does not apply to this kernel source"
	done
	for p in "${patches[@]}"; do
		patch -d "$stage_dir" -p1 --batch --quiet --fuzz=0 --no-backup-if-mismatch <"$p" ||
			die "patch $(basename "$p") does not apply to $(basename "$tree")'s kernel source"
	done

	# 2. New files.
	stage_project_files "$stage_dir"

	# 3. Write what changed; undo what the project dropped since last time.
	(cd "$stage_dir" && find . -type f | sed 's|^\./||' | sort) >"$stage_dir.manifest"
	old=$(git -C "$tree" rev-parse --absolute-git-dir)/overlay-manifest
	if [ -f "$old" ]; then
		comm -23 "$old" "$stage_dir.manifest" | while read -r f; do
			if git -C "$tree" cat-file -e "pristine:$f" 2>/dev/null; then
				git -C "$tree" checkout -q pristine -- "$f"
			else
				git -C "$tree" rm -q --cached --ignore-unmatch -- "$f"
				rm -f "${tree:?}/$f"
			fi
			log "overlay: $(basename "$tree"): dropped $f"
		done
	fi
	# --no-times: a file written gets the time of writing.  Keeping the
	# project file's older mtime could leave it older than an object built
	# from the previous content, and make would not rebuild it.
	changed=$(rsync -a --no-times --checksum --itemize-changes "$stage_dir/" "$tree/" |
		grep -c '^>f' || true)
	mv "$stage_dir.manifest" "$old"
	(cd "$tree" && xargs -a "$old" -d '\n' git add -f --)
	log "overlay: $(basename "$tree"): $(wc -l <"$old") files, $changed written; $(git -C "$tree" diff --cached --shortstat pristine)"
	rm -rf "$stage_dir"
}

overlay_tree "$SRC"

if [ "$(git -C "$FIX" rev-parse -q --verify pristine 2>/dev/null)" != \
	"$(git -C "$SRC" rev-parse pristine)" ]; then
	log "overlay: creating $FIX (a worktree of $SRC at pristine)"
	rm -rf "$FIX"
	git -C "$SRC" worktree prune
	git -C "$SRC" worktree add -q --detach "$FIX" pristine
fi
overlay_tree "$FIX" "${series[@]}"
