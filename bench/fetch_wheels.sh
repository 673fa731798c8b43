#!/usr/bin/env bash
# Run on a machine WITH network access: download the wheels that bench/gpu_check.sh installs
# on a GPU machine without network (Python 3.12, x86_64 Linux). optree is a scanlib
# dependency; pytest and hypothesis are only needed when the GPU machine lacks them.
#
#   bench/fetch_wheels.sh [DIR]       (default: ./wheels, or $SCANLIB_WHEELS)
#
# The directory must then travel with the tree to the GPU machine (it is git-ignored, so
# copy it along explicitly).
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-${SCANLIB_WHEELS:-wheels}}"
pyver="${SCANLIB_WHEEL_PYTHON:-3.12}"
platform="${SCANLIB_WHEEL_PLATFORM:-manylinux2014_x86_64}"
mkdir -p "$dir"
for pkg in optree pytest hypothesis; do
    python3 -m pip download "$pkg" --only-binary=:all: --python-version "$pyver" \
        --platform "$platform" -d "$dir"
done
echo "wheels for Python $pyver on $platform in $dir:"
ls -1 "$dir"
