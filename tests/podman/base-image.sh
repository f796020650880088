#!/bin/bash
# Builds the Debian 12 base image the Containerfile starts from, without a
# registry: debootstrap (minbase) from the Debian mirror, imported with
# `podman import`. Cached twice: the image in podman's storage, and the rootfs
# tarball under /var/tmp (so a wiped storage re-imports in seconds).
# Usage: base-image.sh IMAGE   (prints nothing on success; exit 1 on failure)
set -euo pipefail
image=${1:?image name}
mirror=${PODPROF_DEBIAN_MIRROR:-http://deb.debian.org/debian}
key=$(printf 'bookworm minbase %s v1' "$mirror" | sha256sum | cut -c1-12)
cache=${PODPROF_PODMAN_CACHE:-/var/tmp/podprof-podman}
tarball=$cache/base-$key.tar

if podman image exists "$image" &&
	[[ "$(podman image inspect -f '{{index .Labels "podprof.base"}}' "$image" 2>/dev/null)" == "$key" ]]; then
	exit 0
fi
mkdir -p "$cache"
if [[ ! -s $tarball ]]; then
	root=$(mktemp -d "$cache/rootfs.XXXXXX")
	trap 'rm -rf "$root"' EXIT
	echo "base-image: debootstrap bookworm from $mirror (1-2 min, once)" >&2
	debootstrap --variant=minbase bookworm "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
		{ tail -20 "$cache/debootstrap.log" >&2; exit 1; }
	rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
	tar --numeric-owner -C "$root" -cf "$tarball.tmp" .
	mv "$tarball.tmp" "$tarball"
fi
podman import -q --change 'CMD ["/bin/bash"]' --change "LABEL podprof.base=$key" \
	"$tarball" "$image" >/dev/null
