#!/usr/bin/env bash
# Fetches the Debian 12 packages that building the Python extension needs
# (headers, libraries and pkg-config files of libxxhash, libnuma, liburing,
# hwloc, and pkgconf itself) as .deb files into .gpudeps/ (ignored by git),
# for a machine that has a compiler, CMake and Python but no package index
# and no apt: the GPU machine bench/gpu_check.sh runs on. That script
# unpacks them into a prefix and builds against it (bench/gpu_build.sh).
# Needs apt (run `apt-get update` once first); about 1.5 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(libxxhash0 libxxhash-dev libnuma1 libnuma-dev liburing2 liburing-dev
      libhwloc15 libhwloc-dev libpkgconf3 pkgconf-bin)
mkdir -p .gpudeps
cd .gpudeps
rm -f ./*.deb
apt-get download "${PKGS[@]}"
ls -l ./*.deb
