#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Install what the pipeline needs on a fresh Debian 12 machine, idempotently.
#
# - Host packages come from the machine's own suites only (bookworm).
# - The kernel source and the Rust standard-library source come from newer
#   Debian suites, but those suites are never added to the machine's apt
#   configuration: a private apt state under $CACHE/apt knows them, and is
#   used only to *download* .debs, which are unpacked with dpkg-deb -x.
#   Nothing from a newer suite is ever installed.
# - bindgen-cli comes from crates.io via cargo install --locked, and so
#   does inferno (make demo's flame graph), into $CACHE/inferno-VERSION.

. "$(dirname "$0")/lib.sh"

HOST_PKGS=(
	clang-19 lld-19 llvm-19 libclang-19-dev
	clang-22 lld-22 llvm-22 libclang-22-dev
	flex bison bc libelf-dev libssl-dev cpio python3 xz-utils kmod rsync
	qemu-system-x86 busybox-static gcc-multilib file
	libdw-dev libtraceevent-dev zlib1g-dev libzstd-dev liblzma-dev pkg-config
	binutils python3-matplotlib
	bzip2
)
# (bzip2: one of perf_real.sh's real programs, with libbz2; perl, gzip and
# grep are Essential: every Debian system has them.)
BINDGEN_VERSION=0.72.1
INFERNO_VERSION=0.12.8

host_packages() {
	local missing=()
	for p in "${HOST_PKGS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
			missing+=("$p")
	done
	if [ ${#missing[@]} -eq 0 ]; then
		log "host packages: all present"
		return 0
	fi
	log "host packages: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# --no-upgrade: never touch a package the machine already has.
	apt-get install -y -qq --no-install-recommends --no-upgrade "${missing[@]}" >/dev/null
}

# Private apt configuration that knows only the download-only suites.
PRIV_APT=$CACHE/apt
priv_apt() {
	apt-get -q -o Dir::Etc::SourceList="$PRIV_APT/sources.list" \
		-o Dir::Etc::SourceParts=/dev/null \
		-o Dir::Etc::Preferences=/dev/null \
		-o Dir::Etc::PreferencesParts=/dev/null \
		-o Dir::State::Lists="$PRIV_APT/lists" \
		-o Dir::State::Status=/dev/null \
		-o Dir::Cache="$PRIV_APT/cache" \
		-o APT::Architecture=amd64 \
		-o Debug::NoLocking=1 -o APT::Sandbox::User=root "$@"
}
priv_apt_cache() {
	apt-cache -o Dir::Etc::SourceList="$PRIV_APT/sources.list" \
		-o Dir::Etc::SourceParts=/dev/null \
		-o Dir::Etc::Preferences=/dev/null \
		-o Dir::Etc::PreferencesParts=/dev/null \
		-o Dir::State::Lists="$PRIV_APT/lists" \
		-o Dir::State::Status=/dev/null \
		-o Dir::Cache="$PRIV_APT/cache" "$@"
}

priv_apt_update() {
	mkdir -p "$PRIV_APT/lists/partial" "$PRIV_APT/cache/archives/partial"
	cat >"$PRIV_APT/sources.list" <<-SRC
	deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie-backports main
	SRC
	# Refresh at most once a day.
	if [ -z "$(find "$PRIV_APT/lists" -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -1)" ]; then
		log "private apt: updating trixie-backports index (download-only suite)"
		priv_apt update -qq >/dev/null
	fi
}

# download_deb PKG VERSION-REGEX -> prints path of the cached .deb
download_deb() {
	local pkg=$1 re=$2 ver
	ver=$(priv_apt_cache madison "$pkg" | awk -F'|' '{gsub(/ /,"",$2); print $2}' |
		grep -E "$re" | sort -V | tail -1)
	[ -n "$ver" ] || return 1
	mkdir -p "$CACHE/debs"
	local f
	f=$(ls "$CACHE/debs/${pkg}_${ver//:/%3a}"_*.deb 2>/dev/null | head -1 || true)
	if [ -z "$f" ]; then
		(cd "$CACHE/debs" && priv_apt download "$pkg=$ver" >/dev/null)
		f=$(ls "$CACHE/debs/${pkg}_${ver//:/%3a}"_*.deb | head -1)
	fi
	echo "$f"
}

rust_src() {
	local rv dest
	command -v rustc >/dev/null || die "no rustc on PATH: install a Rust toolchain (rustup) first"
	rv=$(rustc --version | awk '{print $2}')
	dest=$CACHE/rust-src-$rv
	if [ -f "$dest/library/core/src/lib.rs" ]; then
		log "rust-src $rv: present ($dest)"
		return 0
	fi
	priv_apt_update
	local deb
	deb=$(download_deb rust-src "^${rv//./\\.}\+") ||
		die "no Debian rust-src package matches rustc $rv in trixie-backports.
  The kernel needs the standard-library source of exactly the rustc that
  compiles it. Either switch rustup to a version Debian ships
  ('apt-cache madison rust-src' with the private apt in $PRIV_APT), or
  set RUST_LIB_SRC to a matching library/ directory yourself."
	local tmp
	tmp=$(mktemp -d)
	dpkg-deb -x "$deb" "$tmp"
	rm -rf "$dest"
	mkdir -p "$dest"
	mv "$tmp"/usr/src/rustc-*/library "$dest/library"
	rm -rf "$tmp"
	log "rust-src $rv: unpacked from $(basename "$deb")"
}

bindgen_cli() {
	if command -v bindgen >/dev/null &&
		[ "$(bindgen --version | awk '{print $2}')" = "$BINDGEN_VERSION" ]; then
		log "bindgen $BINDGEN_VERSION: present"
		return 0
	fi
	log "bindgen: cargo install --locked bindgen-cli@$BINDGEN_VERSION"
	cargo install -q --locked "bindgen-cli@$BINDGEN_VERSION"
}

# inferno-collapse-perf and inferno-flamegraph for make demo's flame graph,
# in a directory of their own (scripts/flamegraph.sh looks there).
inferno() {
	local root=$CACHE/inferno-$INFERNO_VERSION
	if [ -x "$root/bin/inferno-flamegraph" ] &&
		[ -x "$root/bin/inferno-collapse-perf" ]; then
		log "inferno $INFERNO_VERSION: present ($root)"
		return 0
	fi
	log "inferno: cargo install --locked inferno@$INFERNO_VERSION --root $root"
	cargo install -q --locked --no-default-features --features cli \
		--bin inferno-collapse-perf --bin inferno-flamegraph \
		--root "$root" "inferno@$INFERNO_VERSION"
}

main() {
	mkdir -p "$BUILD" "$CACHE"
	host_packages
	rust_src
	bindgen_cli
	inferno
	[ "${1:-}" = "--need-kernel-deb" ] && priv_apt_update
	return 0
}

# Allow sourcing for the helper functions (fetch-source.sh uses them).
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	main "$@"
fi
