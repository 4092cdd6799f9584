#!/bin/bash
# Builds the engine bundle a GPU host without network needs: the wheels it lacks, installed into
# one folder, trimmed, packed (tar.xz) and split into parts small enough to travel.
#
#   scripts/gpu/build_engine_bundle.sh vllm   [OUTDIR]   # vLLM 0.26.0   (scripts/gpu/vllm-0.26.0.req)
#   scripts/gpu/build_engine_bundle.sh sglang [OUTDIR]   # SGLang 0.5.17 (scripts/gpu/sglang-0.5.17.req)
#
# For a host with Python 3.12 and torch 2.11.0 (+cu130) already installed: the .req files list
# exactly the wheels (cp312, manylinux x86_64) such a host lacks, downloaded with --no-deps, so
# torch and triton are never fetched. vLLM 0.26.0 and SGLang 0.5.17 are the newest releases that
# pin torch 2.11.0; newer ones pin torch 2.14 and do not fit. pip must reach the package registry.
#
# (The wheels are chosen for cp312 by the download, so the install, run by whatever Python
# runs this script, does not check their Requires-Python against itself.)
# Environment: PART_SIZE (default 50M: a part plus a ~9 MB checkout stays under a 64 MiB
# transfer), XZ_THREADS (default 2), XZ_LEVEL (default -9e), KEEP_WHEELS=1 keeps OUTDIR/wheels.
# Output in OUTDIR (default ./output/bundles/ENGINE-VERSION): ENGINE-VERSION-site.tar.xz.partNN,
# SHA256SUMS (of the parts and of the whole), and MANIFEST.txt (the wheels, what was trimmed).
# scripts/gpu/on_gpu_host.sh assembles, checks and unpacks them on the GPU host.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
engine=${1:?usage: build_engine_bundle.sh vllm|sglang [OUTDIR]}
case "$engine" in
  vllm) version=0.26.0 ;;
  sglang) version=0.5.17 ;;
  *) echo "build_engine_bundle: unknown engine '$engine' (vllm or sglang)" >&2; exit 2 ;;
esac
name=$engine-$version
req=$here/$name.req
out=${2:-output/bundles/$name}
mkdir -p "$out"; out=$(cd "$out" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
plat="--python-version 3.12 --implementation cp --only-binary=:all:"
for n in $(seq 5 39); do plat="$plat --platform manylinux_2_${n}_x86_64"; done
plat="$plat --platform manylinux2014_x86_64 --platform linux_x86_64"
# A pip constraint file (PIP_CONSTRAINT, /etc/xdg/pip) must not filter the pinned list.
export PIP_CONSTRAINT=
echo "build_engine_bundle: downloading $(grep -c . "$req") wheels for $name"
python3 -m pip download -q --no-deps --no-cache-dir $plat -d "$work/whl" -r "$req"
python3 -m pip install -q --no-deps --no-compile --no-cache-dir --no-index --ignore-requires-python $plat \
  --target "$work/site" "$work"/whl/*.whl
site=$work/site
before=$(du -sm "$site" | cut -f1)
# What this host (Hopper, Python 3.12, no network) cannot use.
trim=(bin)
if [ "$engine" = vllm ]; then
  # Blackwell-only attention, the Ampere-only FlashAttention 2 build, the optional Rust
  # front end, other Pythons' DeepGEMM builds.
  trim+=(vllm/third_party/fmha_sm100 vllm/vllm-rs vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so)
  for f in "$site"/vllm/third_party/deep_gemm/_C.cpython-31[0134]-*.so; do
    [ -e "$f" ] && trim+=("${f#"$site"/}")
  done
else
  # sglang-kernel's FlashAttention 3 (Hopper) build is 127 MiB as xz on its own: left out, so
  # campaigns use --attention-backend triton --sampling-backend pytorch.
  while IFS= read -r f; do trim+=("${f#"$site"/}"); done < <(find "$site" -name 'flash_ops*.so')
  # xgrammar's static library (for building against it, never loaded) and a Python 3.10-only
  # build of sgl_kernel's InfLLM ops (Python 3.12 cannot load it).
  trim+=(xgrammar/lib/libxgrammar.a)
  for f in "$site"/sgl_kernel/*.cpython-31[0134]-*.so; do
    [ -e "$f" ] && trim+=("${f#"$site"/}")
  done
fi
for t in "${trim[@]}"; do rm -rf "${site:?}/$t"; done
find "$site" -name __pycache__ -prune -exec rm -rf {} +
after=$(du -sm "$site" | cut -f1)
{
  echo "$name bundle, built $(date -u +%FT%TZ) from $(basename "$req")"
  echo "installed: ${before} MiB, after trimming: ${after} MiB"
  echo "trimmed: ${trim[*]}"
  echo "wheels:"; (cd "$work/whl" && ls -1)
} > "$out/MANIFEST.txt"
rm -f "$out/$name-site.tar.xz"*
echo "build_engine_bundle: packing ${after} MiB (xz ${XZ_LEVEL:--9e}, ${XZ_THREADS:-2} threads)"
tar -C "$site" -cf - . | xz -T"${XZ_THREADS:-2}" "${XZ_LEVEL:--9e}" > "$out/$name-site.tar.xz"
if [ "${KEEP_WHEELS:-0}" = 1 ]; then rm -rf "$out/wheels"; mv "$work/whl" "$out/wheels"; fi
cd "$out"
split -b "${PART_SIZE:-50M}" -d "$name-site.tar.xz" "$name-site.tar.xz.part"
sha256sum "$name-site.tar.xz".part* "$name-site.tar.xz" > SHA256SUMS
rm "$name-site.tar.xz"
ls -l "$out"
