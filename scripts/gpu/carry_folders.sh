#!/bin/bash
# Lays a built engine bundle out for a GPU host reached only by a tool that copies the checkout
# (at most 64 MiB a command, with the ignored folders it is told to carry): one folder per
# part, the first with SHA256SUMS and the wheels reportgen needs that such a host lacks.
#
#   scripts/gpu/carry_folders.sh output/bundles/sglang-0.5.17
#
# makes, in the repository's root, .p0/ (part00, SHA256SUMS), .p1/ (part01), ... (consecutive
# parts share a folder where together they fit beside the checkout: a small last part rides
# with the one before it), and .whl/
# (orjson, httptools, shtab, tomli-w for CPython 3.12, manylinux x86_64; downloaded with
# --no-deps, so pip must reach the package registry), and lists them in .git/info/exclude so
# that they never travel unless named. Then, one command each on the GPU host:
#
#   python3 -m pip install -q --no-index --no-deps --target /tmp/deps .whl/*.whl \
#     && scripts/gpu/on_gpu_host.sh stage .p0/*          # carry .whl and .p0
#   scripts/gpu/on_gpu_host.sh stage .p1/*                # carry .p1
#   ...                                                   # the last part, then detach and poll
#
# Build the bundle with parts small enough for a command beside the checkout:
# PART_SIZE=30M scripts/gpu/build_engine_bundle.sh ENGINE.
set -euo pipefail
bundle=${1:?usage: carry_folders.sh BUNDLE_DIR (made by build_engine_bundle.sh)}
root=$(cd "$(dirname "$0")/../.." && pwd)
[ -f "$bundle/SHA256SUMS" ] || { echo "carry_folders: no SHA256SUMS in $bundle" >&2; exit 2; }
mapfile -t parts < <(ls "$bundle"/*.part[0-9][0-9] 2>/dev/null | sort)
[ "${#parts[@]}" -gt 0 ] || { echo "carry_folders: no parts (*.partNN) in $bundle" >&2; exit 2; }
exclude=$root/.git/info/exclude
mkdir -p "$(dirname "$exclude")"
touch "$exclude"
rm -rf "$root"/.p[0-9] "$root"/.p[0-9][0-9]
mkdir -p "$root/.whl"
grep -qxF ".whl/" "$exclude" || echo ".whl/" >> "$exclude"
PIP_CONSTRAINT= python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux_2_28_x86_64 -d "$root/.whl" orjson httptools shtab tomli-w
# What travels beside a folder: the checkout (tracked files and untracked ones git does not
# ignore), and with the first folder the wheels. Consecutive parts share a folder while they
# fit the rest of a command's 64 MiB, less SLACK_MIB (default 2), so a small last part rides
# with the one before it instead of costing a command of its own.
size_of() { stat -c %s "$@" | awk '{s += $1} END {print s + 0}'; }
checkout=$(cd "$root" && git ls-files -z --cached --others --exclude-standard \
  | xargs -0 -r stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
limit=$(( (64 - ${SLACK_MIB:-2}) * 1024 * 1024 - checkout ))
wheels=$(size_of "$root"/.whl/*)
folder=0
used=$(( wheels + $(size_of "$bundle/SHA256SUMS") ))
for part in "${parts[@]}"; do
  size=$(size_of "$part")
  if [ -d "$root/.p$folder" ] && [ $(( used + size )) -gt "$limit" ]; then
    folder=$(( folder + 1 ))
    used=0
  fi
  [ $(( used + size )) -le "$limit" ] || {
    echo "carry_folders: $(basename "$part") ($(( size >> 20 )) MiB) does not fit beside the" \
      "checkout ($(( checkout >> 20 )) MiB) in 64 MiB: build with a smaller PART_SIZE" >&2
    exit 2
  }
  mkdir -p "$root/.p$folder"
  cp "$part" "$root/.p$folder/"
  used=$(( used + size ))
  grep -qxF ".p$folder/" "$exclude" || echo ".p$folder/" >> "$exclude"
done
cp "$bundle/SHA256SUMS" "$root/.p0/"
for dir in "$root"/.p[0-9] "$root"/.p[0-9][0-9]; do
  [ -d "$dir" ] || continue
  echo "carry_folders: $(basename "$dir")/ $(du -sh "$dir" | cut -f1):" \
    "$(cd "$dir" && ls | grep -v SHA256SUMS | tr '\n' ' ')"
done
echo "carry_folders: the checkout travels too: $(( checkout >> 20 )) MiB"
echo "carry_folders: .whl/ $(du -sh "$root/.whl" | cut -f1); listed in .git/info/exclude"
