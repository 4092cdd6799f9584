"""CUDA-graph coverage: which levels ran decode steps without a captured graph.

Engines capture CUDA graphs for decode batches up to a size (vLLM's
``max_cudagraph_capture_size``, in tokens, which a decode step of N running requests is;
SGLang's ``cuda_graph_max_bs``). A step beyond it runs eagerly, kernel by kernel, and a level
whose batches grow past it is measured on another code path than a level below it: a known
case is SGLang's default below its running batch, where decode falls back for good. So a
verdict resting on such a level says so.

Two sources: what the engine's log says per decode step inside a level's window
(``Level.graph_steps``: SGLang's "cuda graph: False"), and, where nothing is said per step,
the resolved configuration (``Experiment.engine_config``): a level whose running requests
(its concurrency, capped by the engine's running limit) exceed the largest captured batch.
"""

from __future__ import annotations

from collections.abc import Sequence

from reportgen import engines
from reportgen.results.findings import Uncovered
from reportgen.results.model import Experiment, Point, sorted_points


def _first_int(config: dict[str, object], keys: Sequence[str]) -> int | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def uncovered(e: Experiment, engine: str) -> list[Uncovered]:
    """``e``'s levels whose decode steps ran without a CUDA graph (none where the engine
    says nothing of it, or its graphs are off on purpose)."""
    eng = engines.ENGINES.get(engine)
    if eng is None:
        return []
    config = e.engine_config or {}
    captured = _first_int(config, eng.graph_max_keys)
    cap = _first_int(config, eng.running_max_keys) or _first_int(e.args, ("max-num-seqs",))
    out = []
    for point in sorted_points({lv.point for lv in e.levels}):
        runs = [lv for lv in e.levels if lv.point == point and not lv.aborted]
        counted = [lv.graph_steps for lv in runs if lv.graph_steps]
        if counted:
            steps = sum(a + b for a, b in counted)
            without = sum(b for _, b in counted)
            if steps and without / steps >= 0.01:
                running = min(point.concurrency, cap) if cap else point.concurrency
                out.append(
                    Uncovered(
                        concurrency=point.concurrency,
                        rate=point.rate,
                        share=without / steps,
                        captured=captured,
                        running=running,
                    )
                )
            continue
        if captured is None or point.rate is not None:
            continue
        running = min(point.concurrency, cap) if cap else point.concurrency
        if running > captured:
            out.append(
                Uncovered(
                    concurrency=point.concurrency,
                    rate=point.rate,
                    captured=captured,
                    running=running,
                )
            )
    return out


def uncovered_said(
    e: Experiment, parent: Experiment | None, engine: str, points: Sequence[Point]
) -> str:
    """Of ``points``, the levels where ``e`` or ``parent`` ran decode steps without graphs,
    in a sentence ("" where none)."""
    found: dict[Point, str] = {}
    for side in (e, parent):
        if side is None:
            continue
        for u in uncovered(side, engine):
            if u.point in points and u.point not in found:
                found[u.point] = f"{side.id} {u.said}"
    if not found:
        return ""
    return (
        " Measured partly without CUDA graphs: "
        + "; ".join(found[p] for p in sorted_points(found))
        + ", so those levels ran another code path than the levels below them."
    )
