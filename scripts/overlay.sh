#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Apply the project to the pristine kernel tree in $BUILD/linux.
#
#   arch/ include/ kernel/ rust/ tools/ -> the same paths in the tree (new files)
#   src/ and Kbuild              -> kernel/unwind/rust/ (the Rust unwinder)
#   patches/*.patch              -> the small changes to upstream files
#
# Idempotent and cheap: each target file is computed in a scratch tree
# (pristine + patches, then the copied files) and written only if its
# content differs, so unchanged files keep their mtime and nothing is
# rebuilt needlessly.  Files a previous overlay installed that the project
# no longer has are restored to pristine (or removed).  The result is staged
# in the tree's git index, so `git -C build/linux diff pristine` (make diff)
# is the whole change against upstream.

. "$(dirname "$0")/lib.sh"

SRC=$BUILD/linux
[ -d "$SRC/.git" ] || die "no kernel tree in $SRC: run scripts/fetch-source.sh"
cd "$SRC"
git rev-parse -q --verify pristine >/dev/null || die "$SRC has no 'pristine' tag"

stage_dir=$(mktemp -d "$BUILD/.overlay.XXXXXX")
trap 'rm -rf "$stage_dir"' EXIT

# 1. Upstream files touched by patches, patched in the scratch tree.
patches=()
for p in "$TOP"/patches/*.patch; do
	[ -e "$p" ] && patches+=("$p")
done
if [ ${#patches[@]} -gt 0 ]; then
	files=$(cat "${patches[@]}" | sed -n 's|^+++ b/||p' | sort -u)
	# shellcheck disable=SC2086
	git archive pristine -- $files | tar -x -C "$stage_dir"
	for p in "${patches[@]}"; do
		patch -d "$stage_dir" -p1 --batch --quiet --no-backup-if-mismatch <"$p" ||
			die "patch $(basename "$p") does not apply to this kernel source"
	done
fi

# 2. New files.
stage_project_files "$stage_dir"

# 3. Write what changed; undo what the project dropped since last time.
(cd "$stage_dir" && find . -type f | sed 's|^\./||' | sort) >"$stage_dir.manifest"
old=.git/overlay-manifest
if [ -f "$old" ]; then
	comm -23 "$old" "$stage_dir.manifest" | while read -r f; do
		if git cat-file -e "pristine:$f" 2>/dev/null; then
			git checkout -q pristine -- "$f"
		else
			git rm -q --cached --ignore-unmatch -- "$f"
			rm -f "$f"
		fi
		log "overlay: dropped $f"
	done
fi
# --no-times: a file written gets the time of writing.  Keeping the
# project file's older mtime could leave it older than an object built
# from the previous content, and make would not rebuild it.
changed=$(rsync -a --no-times --checksum --itemize-changes "$stage_dir/" ./ |
	grep -c '^>f' || true)
mv "$stage_dir.manifest" "$old"
xargs -a "$old" -d '\n' git add -f --
log "overlay: $(wc -l <"$old") files, $changed written; $(git diff --cached --shortstat pristine)"
