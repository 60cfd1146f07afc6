#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Download (never install) Debian's linux-source-7.3 and unpack it into
# $BUILD/linux, as a git repository whose first commit, tagged "pristine",
# is the unmodified tarball.  `git -C build/linux diff pristine` is then the
# whole change the overlay makes to upstream.
#
# Version policy (Debian drops superseded backports over time):
#   - scripts/kernel-source.lock names the version and sha256 this project
#     was verified with.  If that .deb is available (in the cache or from
#     Debian) it is used.
#   - Otherwise the newest linux-source-7.3 7.3.x that Debian offers is used
#     and a warning says so; the overlay's patches are then applied with
#     --check first, so an upstream change that conflicts fails loudly.
#   - KERNEL_DEB_VERSION=<debian version> forces a given version.
# The version and sha256 actually used are written to
# $BUILD/source-version.txt and printed.

. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/setup.sh"

SRC=$BUILD/linux
read -r LOCK_VER LOCK_SHA < <(grep -v '^#' "$TOP/scripts/kernel-source.lock")

pick_deb() {
	local cached
	cached=$(ls "$CACHE/debs/linux-source-7.3_${LOCK_VER}_all.deb" 2>/dev/null || true)
	if [ -z "${KERNEL_DEB_VERSION:-}" ] && [ -n "$cached" ]; then
		echo "$cached"
		return
	fi
	priv_apt_update
	local want=${KERNEL_DEB_VERSION:-$LOCK_VER} deb
	if deb=$(download_deb linux-source-7.3 "^$(re_quote "$want")$" 2>/dev/null); then
		echo "$deb"
		return
	fi
	[ -z "${KERNEL_DEB_VERSION:-}" ] || die "linux-source-7.3 $KERNEL_DEB_VERSION is not available"
	deb=$(download_deb linux-source-7.3 '^7\.3\.') ||
		die "Debian offers no linux-source-7.3 in trixie-backports any more"
	log "WARNING: locked version $LOCK_VER is gone from Debian; using $(basename "$deb")"
	echo "$deb"
}

main_fetch() {
	mkdir -p "$BUILD" "$CACHE"
	local deb ver tmp sha
	deb=$(pick_deb)
	ver=$(dpkg-deb -f "$deb" Version)
	if [ "$(cat "$SRC/.git/pristine-deb-version" 2>/dev/null)" = "$ver" ]; then
		log "kernel source $ver: present in $SRC"
	else
		log "kernel source $ver: unpacking $(basename "$deb")"
		tmp=$(mktemp -d "$BUILD/.deb.XXXXXX")
		dpkg-deb -x "$deb" "$tmp"
		local tarball
		tarball=$(ls "$tmp"/usr/src/linux-source-7.3*.tar.xz)
		sha=$(sha256sum "$tarball" | awk '{print $1}')
		echo "$sha" >"$tmp/sha"
		rm -rf "$SRC"
		mkdir -p "$SRC"
		tar -xJf "$tarball" -C "$SRC" --strip-components=1
		(
			cd "$SRC"
			git init -q
			git config user.name pipeline
			git config user.email pipeline@localhost
			git config core.compression 1
			git config gc.auto 0
			# Debian's .gitignore ignores the whole top level; the tarball
			# holds sources only (builds use O= directories), so force.
			git add -A -f
			git commit -q -m "linux-source-7.3 $ver (pristine)"
			git tag pristine
		)
		echo "$ver" >"$SRC/.git/pristine-deb-version"
		cp "$tmp/sha" "$SRC/.git/pristine-sha256"
		rm -rf "$tmp"
	fi
	sha=$(cat "$SRC/.git/pristine-sha256")
	ver=$(cat "$SRC/.git/pristine-deb-version")
	printf 'linux-source-7.3 %s\ntarball sha256 %s\nkernelversion %s\n' "$ver" "$sha" \
		"$(make -s -C "$SRC" kernelversion)" | tee "$BUILD/source-version.txt"
	if [ "$ver" != "$LOCK_VER" ] || [ "$sha" != "$LOCK_SHA" ]; then
		log "NOTE: this is not the verified source ($LOCK_VER $LOCK_SHA)"
	fi
}

main_fetch "$@"
