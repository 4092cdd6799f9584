"""What the steady-state protocol costs in server (GPU) time, against fixed warm-ups.

    .venv/bin/python benchmarks/protocol_cost.py RUN_DIR [RUN_DIR ...]

For each run directory (its results.json), the seconds its servers were up, by what they were
doing: starting (until ready), the first warm-up, each level's own warm-up until steady
(``workload.warmup``), the priming start (``campaign.prime``), the baseline measured again
at the end (``campaign.bracket``), measured levels, and levels measured again because an
engine event fell in their window. Side by side, what a fixed warm-up would have cost at every
level of every server start in the same run:

- "fixed, longest": each level warmed up as long as the longest steady warm-up this run
  needed (the shortest fixed warm-up that would have been long enough everywhere);
- "fixed, 30 s": each level warmed up 30 s (a round number a careful user might pick);
- "first only": the first warm-up alone (reportgen's protocol before, and what a benchmark
  client with a warm-up request count does), which the same run shows was not enough.

Ratios are the protocol's warm-up seconds over each alternative's. Runs made before the
protocol (no level warm-ups) show only what they spent.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from reportgen.results.rundir import read_bytes
from reportgen.results.store import results_path

FIXED_S = 30.0


def phases(data: dict[str, Any]) -> dict[str, float]:
    out = dict.fromkeys(
        ("start", "first warm-up", "level warm-ups", "priming", "bracket", "measured", "again"),
        0.0,
    )
    settles: list[float] = []
    levels_per_start: list[int] = []
    for e in data["experiments"]:
        bracket = e.get("role") == "bracket"
        for s in e.get("sessions") or []:
            spent = (s.get("ready_s") or 0.0) + ((s.get("warmup") or {}).get("duration_s") or 0.0)
            settled = [x["duration_s"] for x in s.get("settled") or []]
            settles += settled
            levels_per_start.append(
                len(settled)
                or len(
                    {
                        (lv["concurrency"], lv.get("rate"))
                        for lv in e.get("levels") or []
                        if lv.get("session") == s["index"]
                    }
                )
            )
            if s.get("role") == "prime":
                out["priming"] += spent + sum(settled)
                continue
            key = "bracket" if bracket else None
            out[key or "start"] += s.get("ready_s") or 0.0
            out[key or "first warm-up"] += (s.get("warmup") or {}).get("duration_s") or 0.0
            out[key or "level warm-ups"] += sum(settled)
        for lv in e.get("levels") or []:
            d = (lv.get("summary") or {}).get("duration_s") or 0.0
            out["bracket" if bracket else "measured"] += d
            if lv.get("remeasured"):
                out["again"] += d  # the first attempt took about as long
    out["_longest"] = max(settles, default=0.0)
    out["_levels"] = float(sum(levels_per_start))
    out["_settles"] = float(len(settles))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    args = ap.parse_args(argv)
    rows = []
    for run in args.runs:
        path = results_path(run)
        try:
            data = json.loads(read_bytes(path))  # results.json, or its compacted .xz
        except (OSError, ValueError) as exc:
            print(f"protocol_cost: {path}: {exc}", file=sys.stderr)
            return 2
        rows.append(
            (data.get("campaign", {}).get("campaign", {}).get("name", str(run)), run, phases(data))
        )
    keys = ["start", "first warm-up", "level warm-ups", "priming", "bracket", "again", "measured"]
    print(f"{'run':<28}" + "".join(f"{k:>16}" for k in [*keys, "total"]))
    for name, _, p in rows:
        total = sum(p[k] for k in keys)
        print(f"{name[:27]:<28}" + "".join(f"{p[k]:>15.1f}s" for k in keys) + f"{total:>15.1f}s")
    print()
    for name, _, p in rows:
        if not p["_settles"]:
            print(f"{name}: no level warm-ups (a run before the protocol)")
            continue
        mine = p["level warm-ups"] + p["priming"] + p["bracket"]
        n = p["_levels"]
        longest = p["_longest"] * n
        fixed = FIXED_S * n
        total = sum(p[k] for k in keys)
        warm = p["level warm-ups"]
        print(
            f"{name}: the protocol's warm-ups, priming and bracket took {mine:.0f} s of "
            f"{total:.0f} s ({mine / total:.0%}); its {int(p['_settles'])} level warm-ups "
            f"{warm:.0f} s "
            f"(longest {p['_longest']:.1f} s). Fixed at the longest: {longest:.0f} s "
            f"(protocol x{p['level warm-ups'] / longest:.2f} of it); fixed at {FIXED_S:g} s: "
            f"{fixed:.0f} s (x{p['level warm-ups'] / fixed:.2f}); first warm-up only: "
            f"{p['first warm-up']:.0f} s."
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
