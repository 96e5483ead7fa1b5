#!/usr/bin/env bash
# Make the Debian root file system the container suite imports as a local base
# image (there is no registry): debootstrap --variant=minbase bookworm with
# libcap2-bin, tarred with its xattrs, cached outside the repository.
# Without this cache the suite assembles a smaller base from host binaries.
# Usage: scripts/integration-base.sh [CACHE_DIR]   (default /var/cache/ncclrun-integration)
set -euo pipefail
cache="${1:-/var/cache/ncclrun-integration}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
if [ -s "$cache/bookworm.tar" ]; then
  echo "$cache/bookworm.tar exists"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }
mkdir -p "$cache"
rm -rf "$cache/bookworm"
debootstrap --variant=minbase --include=libcap2-bin bookworm "$cache/bookworm" "$mirror"
tar --numeric-owner --xattrs --xattrs-include='security.*' -C "$cache/bookworm" -cf "$cache/bookworm.tar.tmp" .
mv "$cache/bookworm.tar.tmp" "$cache/bookworm.tar"
echo "$cache/bookworm.tar"
