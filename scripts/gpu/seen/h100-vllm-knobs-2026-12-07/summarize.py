#!/usr/bin/env python3
"""Tables from the explore driver's results: json/NAME.bench.json + summary.tsv."""
import json, sys, glob, os, statistics
root = sys.argv[1] if len(sys.argv) > 1 else "."
rows = {}
ready = {}
if os.path.exists(f"{root}/summary.tsv"):
    for line in open(f"{root}/summary.tsv").read().splitlines()[1:]:
        f = line.split("\t")
        ready[f[0]] = f
order = list(ready) or sorted(os.path.basename(p)[:-11] for p in glob.glob(f"{root}/json/*.bench.json"))
def lv(name):
    p = f"{root}/json/{name}.bench.json"
    if not os.path.exists(p):
        return None
    d = json.load(open(p))
    return d["experiments"][0]["levels"]
def g(l, k):
    v = l.get(k)
    return v["mean"] if isinstance(v, dict) else v
print("| start | ready s | C | out tok/s | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | ITL p50 ms | E2E p99 ms | reqs | window s | in flight |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
data = {}
for n in order:
    L = lv(n)
    r = ready.get(n, ["", "?"])[1]
    if not L:
        print(f"| {n} | {r} | - | no result | | | | | | | | |")
        continue
    data[n] = L
    for c in ("1", "16", "64"):
        l = L.get(c)
        if not l:
            continue
        print(f"| {n} | {r} | {c} | {g(l,'output_tok_s'):,.1f} | {g(l,'ttft_ms_p50'):.1f} | {g(l,'ttft_ms_p99'):.1f} | "
              f"{g(l,'tpot_ms_p50'):.2f} | {g(l,'itl_ms_p50'):.2f} | {g(l,'e2e_ms_p99'):.0f} | {l['requests']} | {l['duration_s']:.1f} | {l['in_flight']:.1f} |")
defaults = [n for n in data if n.startswith("default")]
if defaults:
    print("\nDefault starts: output tok/s per level")
    base = {}
    for c in ("1", "16", "64"):
        v = [g(data[n][c], "output_tok_s") for n in defaults if c in data[n]]
        m = statistics.mean(v); base[c] = m
        cv = statistics.stdev(v) / m * 100 if len(v) > 1 else float("nan")
        print(f"C={c}: " + " / ".join(f"{x:,.1f}" for x in v) + f"  mean {m:,.1f}  CV {cv:.2f}%  range {(max(v)-min(v))/m*100:.2f}%")
    for key, lab in (("ttft_ms_p50", "TTFT p50"), ("tpot_ms_p50", "TPOT p50")):
        for c in ("1", "16", "64"):
            v = [g(data[n][c], key) for n in defaults if c in data[n]]
            print(f"  {lab} C={c}: " + " / ".join(f"{x:.2f}" for x in v))
    print("\n| change | C=1 tok/s (x default) | C=16 | C=64 | TTFT p50 C=1/16/64 ms | TPOT p50 C=1/16/64 ms |")
    print("|---|---|---|---|---|---|")
    for n in data:
        cells = []
        for c in ("1", "16", "64"):
            x = g(data[n][c], "output_tok_s")
            cells.append(f"{x:,.0f} (x{x/base[c]:.3f})")
        t = " / ".join(f"{g(data[n][c],'ttft_ms_p50'):.1f}" for c in ("1", "16", "64"))
        p = " / ".join(f"{g(data[n][c],'tpot_ms_p50'):.2f}" for c in ("1", "16", "64"))
        print(f"| {n} | " + " | ".join(cells) + f" | {t} | {p} |")
