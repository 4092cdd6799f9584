#!/bin/bash
# Lays a built engine bundle out for a GPU host reached only by a tool that copies the checkout
# (at most 64 MiB a command, with the ignored folders it is told to carry): one folder per
# part, the first with SHA256SUMS and the wheels reportgen needs that such a host lacks.
#
#   scripts/gpu/carry_folders.sh output/bundles/sglang-0.5.17
#
# makes, in the repository's root, .p0/ (part00, SHA256SUMS), .p1/ (part01), ... and .whl/
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
for i in "${!parts[@]}"; do
  dir=$root/.p$i
  mkdir -p "$dir"
  cp "${parts[$i]}" "$dir/"
  grep -qxF ".p$i/" "$exclude" || echo ".p$i/" >> "$exclude"
done
cp "$bundle/SHA256SUMS" "$root/.p0/"
mkdir -p "$root/.whl"
grep -qxF ".whl/" "$exclude" || echo ".whl/" >> "$exclude"
PIP_CONSTRAINT= python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux_2_28_x86_64 -d "$root/.whl" orjson httptools shtab tomli-w
for i in "${!parts[@]}"; do
  echo "carry_folders: .p$i/ $(du -sh "$root/.p$i" | cut -f1)"
done
echo "carry_folders: .whl/ $(du -sh "$root/.whl" | cut -f1); listed in .git/info/exclude"
