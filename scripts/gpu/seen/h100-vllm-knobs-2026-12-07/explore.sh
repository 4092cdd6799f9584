#!/bin/bash
# GPU exploration driver (kept with its measurements; not part of reportgen). Runs detached on the GPU host
# from /tmp/explore (a copy of this folder): unpack the vLLM bundle, write the dense8b model's
# config, then for every line of /tmp/explore/plan.txt ("NAME<TAB>ARGS", ARGS shell-quoted) not
# yet done: start vLLM by hand (setsid), time launch -> /health 200, run `reportgen bench`
# (C=1,16,64; completions; ~256 in / 128 out; ignore_eos), stop the server by its process group,
# keep its log and the key lines. Plan lines can be removed/added while it runs (read each time).
set -uo pipefail
E=/tmp/explore
RG=$E/rg
cd "$E"
mkdir -p logs json runs done
say() { echo "[explore $(date -u +%T)] $*"; }

# versions, GPU
nvidia-smi > logs/nvidia-smi.txt 2>&1
nvidia-smi -q > logs/nvidia-smi-q.txt 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm,clocks.max.mem,pcie.link.gen.current,pcie.link.width.current,persistence_mode,ecc.mode.current --format=csv > logs/gpu.csv 2>&1
lscpu > logs/lscpu.txt 2>&1
free -g > logs/free.txt 2>&1

t0=$SECONDS
DEPS=/tmp/deps RG_SRC=$RG bash "$RG/scripts/gpu/on_gpu_host.sh" unpack vllm > logs/unpack.log 2>&1
say "unpack rc=$? in $((SECONDS - t0)) s"
export PYTHONPATH=/tmp/sites/vllm-0.26.0:/tmp/deps:$RG
export PYTHONSAFEPATH=1 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 VLLM_DO_NOT_TRACK=1 VLLM_SERVER_DEV_MODE=1
python3 - > logs/versions.txt 2>&1 <<'EOF'
import sys, platform, torch, transformers, vllm
print("python", sys.version.split()[0], platform.platform())
print("vllm", vllm.__version__, "torch", torch.__version__, "cuda", torch.version.cuda,
      "transformers", transformers.__version__)
try:
    import triton; print("triton", triton.__version__)
except Exception as e: print("triton?", e)
print("device", torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0),
      torch.cuda.get_device_properties(0).total_memory)
import pynvml as n
n.nvmlInit(); h = n.nvmlDeviceGetHandleByIndex(0)
print("nvml name", n.nvmlDeviceGetName(h), "driver", n.nvmlSystemGetDriverVersion(),
      "power limit W", n.nvmlDeviceGetPowerManagementLimit(h) / 1000,
      "max SM MHz", n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM),
      "max mem MHz", n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_MEM),
      "mem bytes", n.nvmlDeviceGetMemoryInfo(h).total)
EOF
t0=$SECONDS
python3 "$RG/scripts/build_model.py" --preset dense8b --eos in-vocab --config-only --out /tmp/models/dense8b > logs/model.log 2>&1
say "model rc=$? in $((SECONDS - t0)) s"
MODEL=/tmp/models/dense8b
PORT=18700

printf 'name\tready_s\tserver_alive\tbench_rc\tlaunch_utc\tready_utc\tend_utc\targs\n' > summary.tsv
while :; do
  line=$(grep -v '^#' plan.txt 2>/dev/null | while IFS=$'\t' read -r n a; do
    [ -n "$n" ] && [ ! -e "done/$n" ] && { printf '%s\t%s\n' "$n" "$a"; break; }; done)
  [ -n "$line" ] || break
  name=${line%%$'\t'*}; argstr=${line#*$'\t'}
  [ "$argstr" = "$line" ] && argstr=
  eval "extra=($argstr)"
  touch "done/$name"
  say "start $name: ${extra[*]:-}"
  launch=$(date -u +%FT%TZ); ts=$(date +%s.%N)
  setsid python3 -m vllm.entrypoints.cli.main serve "$MODEL" --load-format dummy \
    --host 127.0.0.1 --port $PORT --gpu-memory-utilization 0.85 --max-model-len 2048 \
    --disable-uvicorn-access-log "${extra[@]}" > "logs/$name.server.log" 2>&1 < /dev/null &
  server=$!
  ready=$(python3 - "$server" "$ts" "$PORT" <<'PY'
import os, sys, time, urllib.request
pid, ts, port = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
while time.time() - ts < 420:
    try:
        os.kill(pid, 0)
    except OSError:
        print("DIED"); sys.exit()
    try:
        if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200:
            print(f"{time.time() - ts:.1f}"); sys.exit()
    except Exception:
        pass
    time.sleep(0.25)
print("TIMEOUT")
PY
)
  alive=1; kill -0 $server 2>/dev/null || alive=0
  case "$ready" in DIED|TIMEOUT|"") fail=${ready:-none}; ready=;; *) fail=;; esac
  readyutc=$(date -u +%FT%TZ)
  say "$name ready=${ready:-FAILED $fail} alive=$alive"
  brc=-
  if [ -n "$ready" ]; then
    python3 -c "import urllib.request,sys;sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$PORT/server_info',timeout=5).read().decode())" > "json/$name.server_info.json" 2>/dev/null || true
    nvidia-smi dmon -s puc -o T > "logs/$name.dmon.txt" 2>&1 &
    dmon=$!
    python3 -m reportgen bench http://127.0.0.1:$PORT --engine vllm --api completions \
      --concurrency 1,16,64 --duration "${DUR:-8}" --repetitions "${REPS:-1}" \
      --input-tokens 256 --output-tokens 128 --range-ratio 0.5 --ignore-eos \
      --tokenizer "$MODEL" --warmup 4 --level-warmup-max "${WARM:-20}" --seed 0 \
      --name "$name" --output "$E/runs" --no-pdf --quiet --json \
      --save-result "json/$name.bench.json" > "logs/$name.bench.log" 2>&1
    brc=$?
    kill $dmon 2>/dev/null
    say "$name bench rc=$brc"
  fi
  kill -TERM -- -$server 2>/dev/null
  for _ in $(seq 1 40); do kill -0 -- -$server 2>/dev/null || break; sleep 0.5; done
  kill -KILL -- -$server 2>/dev/null
  sleep 1
  grep -E "non-default args|Asynchronous scheduling|cudagraph_capture_sizes|max_cudagraph_capture_size|Initializing a V1 LLM engine|compilation_config|GPU KV cache size|Maximum concurrency|Available KV cache memory|Graph capturing finished|torch.compile took|torch.compile takes|Model loading took|init engine|[Cc]hunked prefill|JIT compilation|attention backend|Using .*[Bb]ackend|Directly load|Compiling a graph|Dynamo bytecode transform|Cache the graph|CUDA graph|cudagraph|Performance mode|prefix caching|fp8|[Ss]pec|Error|error|Traceback|WARNING" \
    "logs/$name.server.log" | cut -c1-4000 > "logs/$name.key.txt"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "${ready:-FAILED-$fail}" "$alive" "$brc" "$launch" "$readyutc" "$(date -u +%FT%TZ)" "$argstr" >> summary.tsv
done
say "plan finished"
echo 0 > finished
