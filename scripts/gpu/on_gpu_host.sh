#!/bin/bash
# Runs on the GPU host (no network; Python 3.12 with torch 2.11.0+cu130): puts together an
# engine bundle made by scripts/gpu/build_engine_bundle.sh, checks it, unpacks it, checks the
# engine imports, builds the test model and runs a campaign with reportgen. Run it from the
# repository's root (campaigns name the model as output/models/small-moe-eos).
#
# All in one go, when every part of the bundle is on the host (in BUNDLES):
#   scripts/gpu/on_gpu_host.sh all vllm   campaigns/vllm-h200.toml
#   scripts/gpu/on_gpu_host.sh all sglang campaigns/sglang-h200.toml
#
# Or step by step (when the parts arrive one at a time, say, each with a transfer limit):
#   stage FILE...            copy bundle parts and their SHA256SUMS into BUNDLES/<engine>-<version>/
#   unpack ENGINE            check every part and the whole against SHA256SUMS, unpack into
#                            SITES/<engine>-<version>, import the engine
#   model [CAMPAIGN]         build the test models (in-vocabulary EOS) once: the 0.5 B MoE with
#                            random weights into MODELS/small-moe-eos and the 8B-shaped dense
#                            one (config only, for --load-format dummy) into MODELS/dense8b,
#                            linked as output/models/small-moe-eos and output/models/dense8b
#   help ENGINE FILE         the engine's own help, every flag (what reportgen checks flags with)
#   flags ENGINE CAMPAIGN [JSON]
#                            every experiment's flags parsed by the engine's own argument parser
#                            (scripts/gpu/check_flags.py): names, types and choices
#   run ENGINE CAMPAIGN [reportgen run options, e.g. --resume RUN_DIR]
#                            reportgen run CAMPAIGN --output RUNS --no-pdf --quiet; with
#                            STOP_BY (epoch seconds) it starts no experiment expected to end
#                            after it (EXPERIMENT_S each, default 170) and stops the run in time
#                            (SIGTERM: the server is stopped, finished experiments are kept; go
#                            on later with `run ENGINE CAMPAIGN --resume RUN_DIR`). With
#                            WATCH_DIR, scripts/gpu/engine_fixtures.py watch records every
#                            server's raw /metrics (first and last) and info answers there
#                            (and vLLM runs with VLLM_SERVER_DEV_MODE=1, for its /server_info).
#   bench ENGINE [OPTIONS]   the engine started by hand (setsid, port BENCH_PORT or 8000) with the
#                            test model (BENCH_MODEL, default output/models/small-moe-eos; more
#                            server flags in BENCH_ARGS, e.g. "--load-format dummy"), then `reportgen bench http://127.0.0.1:PORT OPTIONS`
#                            against it (and, with BENCH_THEN, a second `reportgen bench` with
#                            those options), then the server stopped by its process group
#   watch ENGINE STARTS [OPTIONS]
#                            STARTS server starts, each benchmarked by `bench` (OPTIONS) while
#                            scripts/gpu/host_watch.py samples every CPU's busy and stolen share
#                            and every process's CPU into RUNS/watch/ (odd starts placed by the
#                            system, even ones with the server and the client on CPUs of their own)
#   search ENGINE [OPTIONS]  unpack, the test models, then `bench` (OPTIONS; BENCH_THEN as there),
#                            every bench run directory packed as RUNS/ENGINE-VERSION-bench-run.tar.xz
#                            (what `detach` runs with DETACH_AS=search)
#   pack RUN_DIR FILE        the run directory as one tar.xz (to bring back)
#   detach ENGINE CAMPAIGN [reportgen run options]     (DETACH_AS=watch: detach ENGINE STARTS ...)
#                            `all`, in a process session of its own that outlives the command
#                            which started it, from a copy of the checkout in RG_COPY (default
#                            /tmp/rg: a later transfer of the checkout does not touch it); its
#                            output in RUNS/detached.log, its exit status in RUNS/detached.rc
#   poll SECONDS DEST        waits for a detached run, at most SECONDS, copying its newest
#                            results.json and the log's tail into DEST every 15 s (so what was
#                            measured comes back even from a command cut short), and at the end
#                            the packed run and its exit status (or, still running, the run
#                            directory so far as partial-run.tar.xz)
#
# Environment: HELP=0 (\`all\` and \`detach\` skip the help text: 10-20 s of a tight session),
# BUNDLES (default /tmp/bundles), SITES (/tmp/sites), MODELS (/tmp/models), RUNS
# (/tmp/runs), RG_SRC (the reportgen to run, default: this checkout; a known-good copy of the
# sources can be given instead), DEPS (extra folders for PYTHONPATH, e.g. unpacked wheels of
# orjson and httptools, which reportgen needs and the host lacks).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export BUNDLES=${BUNDLES:-/tmp/bundles}
export SITES=${SITES:-/tmp/sites}
export MODELS=${MODELS:-/tmp/models}
export RUNS=${RUNS:-/tmp/runs}
RG_SRC=${RG_SRC:-$root}
DEPS=${DEPS:-}
EXPERIMENT_S=${EXPERIMENT_S:-170}

say() { echo "on_gpu_host: $*" >&2; }
die() { say "$*"; exit 1; }

name_of() {  # ENGINE -> ENGINE-VERSION (the versions build_engine_bundle.sh builds)
  case "$1" in
    vllm) echo vllm-0.26.0 ;;
    sglang) echo sglang-0.5.17 ;;
    *) die "unknown engine '$1' (vllm or sglang)" ;;
  esac
}

engine_env() {  # the environment an engine and reportgen run in
  local name; name=$(name_of "$1")
  [ -d "$SITES/$name" ] || die "$SITES/$name is missing: run 'unpack $1' first"
  export PYTHONPATH="$SITES/$name${DEPS:+:$DEPS}:$RG_SRC${PYTHONPATH:+:$PYTHONPATH}"
  # PYTHONSAFEPATH: `python -m` must not put the current folder first on sys.path, or a
  # checkout's own reportgen/ would win over RG_SRC (for reportgen and every child it starts).
  export PYTHONSAFEPATH=1 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
  if [ "$1" = vllm ]; then
    # FlashInfer is not in the bundle: with its sampler vLLM compiles kernels at run time.
    export VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 VLLM_DO_NOT_TRACK=1
  else
    export SGLANG_DISABLE_REQUEST_LOGGING=1
  fi
}

stage() {
  local f base name
  for f in "$@"; do
    base=$(basename "$f")
    case "$base" in
      vllm-*|sglang-*) name=${base%%-site.tar.xz*} ;;
      SHA256SUMS) name=$(awk 'NR==1 {sub(/-site.tar.xz.*/, "", $2); print $2}' "$f") ;;
      *) die "stage: $f is not a bundle part or SHA256SUMS" ;;
    esac
    mkdir -p "$BUNDLES/$name"
    cp "$f" "$BUNDLES/$name/"
    say "staged $base ($(du -h "$f" | cut -f1)) in $BUNDLES/$name"
  done
}

unpack() {
  local name dir site
  name=$(name_of "$1"); dir=$BUNDLES/$name; site=$SITES/$name
  [ -f "$dir/SHA256SUMS" ] || die "unpack: $dir/SHA256SUMS is missing (stage it with the parts)"
  (cd "$dir" && grep 'part' SHA256SUMS | sha256sum -c --quiet) || die "unpack: a part is missing or damaged"
  cat "$dir/$name-site.tar.xz".part* > "$dir/$name-site.tar.xz"
  (cd "$dir" && grep -v 'part' SHA256SUMS | sha256sum -c --quiet) || die "unpack: the parts put together do not match"
  rm -rf "$site"; mkdir -p "$site"
  local t0=$SECONDS
  xz -dc -T0 "$dir/$name-site.tar.xz" | tar -x -C "$site"
  rm -f "$dir/$name-site.tar.xz"
  say "unpacked $name into $site in $((SECONDS - t0)) s ($(du -sh "$site" | cut -f1))"
  # The bundle has no __pycache__: compiled here once, on every core, rather than by each
  # server start (where PYTHONDONTWRITEBYTECODE is set) or by the first one alone, serially.
  t0=$SECONDS
  python3 -m compileall -q -j 0 "$site" > /dev/null 2>&1 || true
  say "compiled $name's Python sources in $((SECONDS - t0)) s (PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-unset})"
  engine_env "$1"
  local mod=$1
  python3 -c "import $mod, torch, transformers; print('on_gpu_host: import ok:', '$mod', $mod.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'transformers', transformers.__version__)"
}

model() {  # the test models: the 0.5 B MoE (random weights) and the 8B-shaped dense one; with a
  # campaign file, only those it names (the MoE's weights take half a minute to draw)
  local out=$MODELS/small-moe-eos dense=$MODELS/dense8b
  if [ ! -f "$out/config.json" ] && { [ -z "${1:-}" ] || grep -q small-moe-eos "$1"; }; then
    python3 "$RG_SRC/scripts/build_model.py" --preset small --eos in-vocab --out "$out"
  fi
  # config and tokenizer only: the engines draw its weights at load (--load-format dummy)
  if [ ! -f "$dense/config.json" ]; then
    python3 "$RG_SRC/scripts/build_model.py" --preset dense8b --eos in-vocab --config-only --out "$dense"
  fi
  mkdir -p "$root/output/models"
  ln -sfn "$out" "$root/output/models/small-moe-eos"
  ln -sfn "$dense" "$root/output/models/dense8b"
  say "models: output/models/small-moe-eos -> $out, output/models/dense8b -> $dense"
}

help_text() {
  engine_env "$1"
  local file=$2
  if [ "$1" = vllm ]; then
    python3 -m vllm.entrypoints.cli.main serve --help=all > "$file" 2>&1
  else
    python3 -m sglang.launch_server --help > "$file" 2>&1
  fi
  say "help: $(grep -c -- '--' "$file") lines with flags in $file"
}

flags() {
  engine_env "$1"
  python3 "$here/check_flags.py" "$2" ${3:+--out "$3"}
}

run() {
  local engine=$1 campaign=$2; shift 2
  engine_env "$engine"
  mkdir -p "$RUNS"
  local log; log=$(mktemp "$RUNS/reportgen.XXXX.log")
  local watcher=
  if [ -n "${WATCH_DIR:-}" ]; then
    local port
    port=$(python3 -c "import tomllib,sys; print(tomllib.load(open(sys.argv[1],'rb'))['server']['args'].get('port', 8000))" "$campaign")
    python3 "$here/engine_fixtures.py" watch --port "$port" --out "$WATCH_DIR" &
    watcher=$!
    # vLLM answers /server_info (its resolved configuration) only in its development mode.
    [ "$engine" = vllm ] && export VLLM_SERVER_DEV_MODE=1
  fi
  cd "$root"
  python3 -m reportgen run "$campaign" --output "$RUNS" --no-pdf --quiet "$@" > >(tee "$log") 2>&1 &
  local rg=$!
  if [ -n "${STOP_BY:-}" ]; then
    python3 - "$rg" "$log" "$STOP_BY" "$EXPERIMENT_S" <<'EOF' &
import json, os, re, signal, sys, time
pid, log, stop_by, exp_s = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
run_dir, seen = None, None
def stop(why):
    print(f"on_gpu_host: stopping the run: {why}", flush=True)
    os.kill(pid, signal.SIGTERM)
while True:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        break
    now = time.time()
    if run_dir is None:
        m = re.search(r"run directory: (\S+)", open(log).read())
        run_dir = m.group(1) if m else None
    if run_dir:
        try:
            data = json.load(open(os.path.join(run_dir, "results.json")))
        except (OSError, ValueError):
            data = None
        running = [e["id"] for e in (data or {}).get("experiments", []) if e.get("status") == "running"]
        if running and running[0] != seen:
            seen = running[0]
            if now + exp_s > stop_by:
                stop(f"{seen} would end after the deadline ({stop_by - now:.0f} s left)")
                break
    if now > stop_by - 30:
        stop("the deadline is 30 s away")
        break
    time.sleep(1)
EOF
  fi
  local rc=0
  wait "$rg" || rc=$?
  if [ -n "$watcher" ]; then sleep 6; kill "$watcher" 2>/dev/null || true; fi
  local dir; dir=$(sed -n 's/^run directory: //p' "$log" | tail -1)
  say "reportgen exited $rc; run directory: $dir"
  echo "$dir" > "$RUNS/last-$engine"
  return 0
}

bench() {  # ENGINE [reportgen bench options]: the engine started by hand, then benchmarked
  local engine=$1; shift
  engine_env "$engine"
  cd "$root"
  mkdir -p "$RUNS"
  local log=${BENCH_LOG:-$RUNS/$engine-bench-server.log} model=${BENCH_MODEL:-output/models/small-moe-eos}
  local port=${BENCH_PORT:-8000} extra=() wrap=() cwrap=()
  [ -n "${BENCH_ARGS:-}" ] && read -r -a extra <<< "$BENCH_ARGS"
  # BENCH_PIN_SERVER / BENCH_PIN_CLIENT: CPU lists (taskset -c) for the server and the client
  [ -n "${BENCH_PIN_SERVER:-}" ] && wrap=(taskset -c "$BENCH_PIN_SERVER")
  [ -n "${BENCH_PIN_CLIENT:-}" ] && cwrap=(taskset -c "$BENCH_PIN_CLIENT")
  if [ "$engine" = vllm ]; then
    setsid "${wrap[@]}" python3 -m vllm.entrypoints.cli.main serve "$model" --port "$port" \
      --gpu-memory-utilization 0.85 --max-model-len 4096 "${extra[@]}" > "$log" 2>&1 &
  else
    setsid "${wrap[@]}" python3 -m sglang.launch_server --model-path "$model" --port "$port" \
      --attention-backend triton --sampling-backend pytorch --enable-metrics \
      --mem-fraction-static 0.8 "${extra[@]}" > "$log" 2>&1 &
  fi
  local server=$!  # setsid: its own process group, stopped as one below
  local t0=$SECONDS
  python3 -c '
import sys, time, httpx
deadline = time.monotonic() + 400
while time.monotonic() < deadline:
    try:
        if httpx.get(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=2).status_code == 200:
            sys.exit(0)
    except httpx.HTTPError:
        pass
    time.sleep(1)
sys.exit(1)
' "$port" || say "bench: the server did not answer /health in time"
  say "bench: $engine answered /health after $((SECONDS - t0)) s"
  "${cwrap[@]}" python3 -m reportgen bench "http://127.0.0.1:$port" --output "$RUNS" --no-pdf "$@" || say "bench: reportgen exited $?"
  if [ -n "${BENCH_THEN:-}" ]; then  # a second benchmark of the same server, these options
    eval "set -- $BENCH_THEN"
    python3 -m reportgen bench "http://127.0.0.1:$port" --output "$RUNS" --no-pdf "$@" || say "bench: reportgen exited $?"
  fi
  kill -TERM -- "-$server" 2>/dev/null || true
  for _ in $(seq 1 30); do kill -0 -- "-$server" 2>/dev/null || break; sleep 1; done
  kill -KILL -- "-$server" 2>/dev/null || true
  say "bench: server stopped; its log is $log"
}

watch() {  # ENGINE STARTS [reportgen bench options]: STARTS server starts of BENCH_MODEL, each
  # benchmarked by `bench` while scripts/gpu/host_watch.py samples the host's CPUs and processes
  # into RUNS/watch/; odd starts as the system places them, even ones with the server on all
  # CPUs but the last two and the client on those two
  local engine=$1 starts=$2; shift 2
  unpack "$engine"; model "$root/campaigns/$engine-h200.toml"  # the dense model only
  local n; n=$(nproc)
  local wdir=$RUNS/watch; mkdir -p "$wdir"
  help_text "$engine" "$wdir/$(name_of "$engine")-help.txt" || true
  { lscpu; echo; cat /proc/cpuinfo | grep -m1 -i "model name\|flags" ; } > "$wdir/lscpu.txt" 2>&1 || true
  local i w
  for i in $(seq 1 "$starts"); do
    python3 "$root/scripts/gpu/host_watch.py" "$wdir/start$i.jsonl" &
    w=$!
    if [ $((i % 2)) = 0 ]; then
      BENCH_PIN_SERVER=0-$((n - 3)) BENCH_PIN_CLIENT=$((n - 2))-$((n - 1)) \
        BENCH_LOG=$wdir/start$i.server.log bench "$engine" --name "watch-$i" "$@"
    else
      BENCH_LOG=$wdir/start$i.server.log bench "$engine" --name "watch-$i" "$@"
    fi
    kill -TERM "$w" 2>/dev/null || true; wait "$w" || true
    say "watch: start $i of $starts done"
  done
}
search() {  # ENGINE [reportgen bench options]: a bench run on a fresh host, packed to bring back
  local engine=$1; shift
  unpack "$engine"; model ""
  local before; before=$(ls -d "$RUNS"/*/*/ 2>/dev/null | sort || true)
  bench "$engine" "$@"
  local new; new=$(comm -13 <(echo "$before") <(ls -d "$RUNS"/*/*/ 2>/dev/null | sort) | sed 's:/$::')
  [ -n "$new" ] || die "search: bench left no run directory in $RUNS"
  # relative to RUNS: NAME/RUN_ID for each run the bench made
  tar -C "$RUNS" -cf - $(for d in $new; do echo "${d#"$RUNS"/}"; done) | xz -T0 -6 > "$RUNS/$(name_of "$engine")-bench-run.tar.xz"
  say "search: packed $(echo "$new" | wc -l) bench run(s) into $RUNS/$(name_of "$engine")-bench-run.tar.xz"
}

pack() {
  local dir=$1 file=$2
  tar -C "$(dirname "$dir")" -cf - "$(basename "$dir")" | xz -T0 -6 > "$file"
  say "packed $dir into $file ($(du -h "$file" | cut -f1))"
}

detach() {
  local copy=${RG_COPY:-/tmp/rg}
  mkdir -p "$RUNS"; rm -f "$RUNS/detached.rc"
  rm -rf "$copy"; mkdir -p "$copy"
  (cd "$root" && tar -cf - --exclude=./output --exclude=./.whl --exclude=./.venv .) | tar -xf - -C "$copy"
  mkdir -p "$copy/output"
  [ "$RG_SRC" = "$root" ] && RG_SRC=$copy
  # setsid: its own session, so the end of the command that started it does not end it
  # DETACH_AS: the subcommand run so (default all; watch for `watch ENGINE STARTS ...`,
  # search for `search ENGINE OPTIONS`)
  RG_SRC=$RG_SRC setsid nohup bash -c '"$0" '"${DETACH_AS:-all}"' "$@"; echo $? > "$RUNS/detached.rc"' \
    "$copy/scripts/gpu/on_gpu_host.sh" "$@" > "$RUNS/detached.log" 2>&1 < /dev/null &
  say "detached: $* (pid $!, from $copy; output in $RUNS/detached.log)"
}

poll() {
  local seconds=$1 dest=$2 end=$((SECONDS + $1)) last
  mkdir -p "$dest"
  while :; do
    # a run directory is RUNS/CAMPAIGN/RUN_ID
    last=$(ls -t "$RUNS"/*/*/results.json 2>/dev/null | head -1 || true)
    [ -n "$last" ] && cp "$last" "$dest/results.json"
    [ -f "$RUNS/detached.log" ] && tail -c 200000 "$RUNS/detached.log" > "$dest/detached.log"
    [ -d "$RUNS/watch" ] && XZ_OPT="-1 -T0" tar -cJf "$dest/watch.tar.xz" -C "$RUNS" watch $(cd "$RUNS" && ls -d watch-* 2>/dev/null)
    if [ -f "$RUNS/detached.rc" ]; then
      cp "$RUNS/detached.rc" "$dest/"
      cp "$RUNS"/*-run.tar.xz "$dest/" 2>/dev/null || true
      say "poll: the detached run has ended (exit $(cat "$RUNS/detached.rc"))"
      return 0
    fi
    [ "$SECONDS" -ge "$end" ] && break
    sleep $(( end - SECONDS < 15 ? (end - SECONDS > 0 ? end - SECONDS : 1) : 15 ))
  done
  # what was measured so far, raw tables included, so a machine that goes back (or a device
  # budget that ends) before the run does still leaves a run directory that renders and verifies
  [ -n "$last" ] && pack "$(dirname "$last")" "$dest/partial-run.tar.xz"
  say "poll: still running after $seconds s"
}

cmd=${1:-}; shift || true
case "$cmd" in
  stage) stage "$@" ;;
  unpack) unpack "$1" ;;
  model) model "${1:-}" ;;
  help) help_text "$1" "$2" ;;
  flags) flags "$@" ;;
  run) run "$@" ;;
  bench) bench "$@" ;;
  watch) watch "$@" ;;
  search) search "$@" ;;
  pack) pack "$1" "$2" ;;
  detach) detach "$@" ;;
  poll) poll "$1" "$2" ;;
  all)
    engine=$1 campaign=$2; shift 2
    unpack "$engine"; model "$campaign"
    [ "${HELP:-1}" = 0 ] || help_text "$engine" "$RUNS/$(name_of "$engine")-help.txt"
    run "$engine" "$campaign" "$@"
    pack "$(cat "$RUNS/last-$engine")" "$RUNS/$(name_of "$engine")-run.tar.xz"
    ;;
  *) sed -n '2,30p' "$0"; exit 2 ;;
esac
