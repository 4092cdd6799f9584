"""The benchmark's tables (Markdown, ready for the README), from the saved results only."""

from __future__ import annotations

from typing import Any

PEER_ORDER = ["reportgen", "guidellm", "aiperf", "sglang", "vllm"]


def _f(x: Any, digits: int = 0) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and digits == 0 and abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:,.{digits}f}"


def one_line(row: dict[str, Any]) -> str:
    head = f"  {row['client']} C={row['concurrency']}: "
    if not row.get("ok"):
        return head + "FAILED " + str(row.get("error", ""))[:400].replace("\n", " | ")
    text = (
        f"{_f(row['req_s'], 1)} req/s, {_f(row.get('chunks_s'))} chunks/s, "
        f"CPU {_f(row.get('cpu_window_s'), 2)} s in window ({_f(row.get('cores'), 2)} cores), "
        f"{_f(row['cpu_total_s'], 1)} s total, wall {row['wall_s']} s"
    )
    acc = row.get("accuracy")
    if acc:
        t = acc["ttft_error"]
        text += f"; TTFT err p50 {_f(t['p50_ms'], 1)} p99 {_f(t['p99_ms'], 1)} ms"
    return head + text


def _best_peer(rows: list[dict[str, Any]], key: str, lower: bool = False) -> float | None:
    vals = [float(r[key]) for r in rows if r["client"] != "reportgen" and r.get(key) is not None]
    if not vals:
        return None
    return min(vals) if lower else max(vals)


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: (r["concurrency"], PEER_ORDER.index(r["client"])))


def zero_table(results: dict[str, Any]) -> str:
    rows = [r for r in results["runs"] if r["workload"] == "zero"]
    if not rows:
        return ""
    srv = results["servers"].get("zero", {}).get("description", "")
    cfg = results["plan"]["zero"]
    srv_cores = max((r.get("server_cores") or 0.0) for r in rows)
    out = [
        f"Zero-work server ({srv}; it used at most {srv_cores:.2f} of a core); requests "
        f"per level = {cfg['per_c']}*C, at least {cfg['floor']}, at most {cfg['cap']}; "
        f"{cfg['chunks']} chunks each. req/s and chunks/s as each tool reports them. CPU: "
        "user+sys of the client's process tree, in its measured window (cores used = that / "
        "window; req/s per core = req/s / cores used) and for the whole process (start-up "
        "included).",
        "",
        "| C | client | req/s | chunks/s | cores used | req/s per core "
        "| CPU s (window) | CPU s (process) | wall s | req/s vs best peer "
        "| req/s per core vs best peer |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in sorted({r["concurrency"] for r in rows}):
        level = [r for r in rows if r["concurrency"] == c]
        best = _best_peer([r for r in level if r.get("ok")], "req_s")
        best_core = _best_peer([r for r in level if r.get("ok")], "req_per_core_s")
        for r in _sorted(level):
            if not r.get("ok"):
                err = str(r.get("error", ""))[:80].replace("|", "/").replace("\n", " ")
                out.append(f"| {c} | {r['client']} | failed: {err} |||||||||")
                continue
            ratio = f"{r['req_s'] / best:.2f}x" if best else "-"
            rc = r.get("req_per_core_s")
            ratio_core = f"{rc / best_core:.2f}x" if best_core and rc else "-"
            out.append(
                f"| {c} | {r['client']} | {_f(r['req_s'], 1)} | {_f(r.get('chunks_s'))} "
                f"| {_f(r.get('cores'), 2)} | {_f(rc, 1)} "
                f"| {_f(r.get('cpu_window_s'), 2)} | {_f(r['cpu_total_s'], 1)} | {r['wall_s']} "
                f"| {ratio} | {ratio_core} |"
            )
    return "\n".join(out)


def _pair(s: dict[str, Any] | None) -> str:
    if not s or s.get("p50_ms") is None:
        return "-"
    return f"{s['p50_ms']:+.1f} / {s['p99_ms']:+.1f}"


def paced_table(results: dict[str, Any]) -> str:
    rows = [r for r in results["runs"] if r["workload"] == "paced"]
    if not rows:
        return ""
    server = results.get("servers", {}).get("paced", {}).get("description", "")
    received = (
        "request received (kernel time)"
        if "SO_TIMESTAMPNS" in server
        else "request received (its handler started)"
    )
    out = [
        f"Paced server ({server or 'TTFT 50 ms, ITL 10 ms, 64 tokens'}); requests per level = "
        f"{results['plan']['paced']['per_c']}*C. All in ms, p50 / p99, client minus server "
        "(positive = the client saw it late). TTFT err: client TTFT - (first chunk written - "
        f"{received}). ITL err: per chunk, client gap - server gap. Request lag: server "
        "received - client started. Chunk arrival lag: client "
        "arrival - server write, on time.time(). Server TTFT / ITL: the server's own p50 / p99.",
        "",
        "| C | client | req/s | client cores | server cores | TTFT err | ITL err | request lag "
        "| chunk arrival lag | server TTFT | server ITL | matched | matched by |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in _sorted(rows):
        c = r["concurrency"]
        if not r.get("ok") and not r.get("accuracy"):
            err = str(r.get("error", ""))[:80].replace("|", "/").replace("\n", " ")
            out.append(f"| {c} | {r['client']} | failed: {err} |||||||||||")
            continue
        acc = r.get("accuracy") or {}
        itl = acc.get("itl_error")
        itl_s = _pair(itl)
        if itl is None and acc.get("itl_error_per_request_mean"):
            itl_s = _pair(acc["itl_error_per_request_mean"]) + " (per-request mean)"
        lag = acc.get("arrival_lag_all_chunks")
        lag_s = _pair(lag)
        if lag is None and acc.get("arrival_lag_first_chunk"):
            lag_s = _pair(acc["arrival_lag_first_chunk"]) + " (first chunk)"
        truth = r.get("server_truth") or {}
        st, si = truth.get("ttft") or {}, truth.get("itl") or {}
        behind = "*" if r.get("warnings") else ""
        out.append(
            f"| {c}{behind} | {r['client']} | {_f(r.get('req_s'), 1)} | {_f(r.get('cores'), 2)} "
            f"| {_f(r.get('server_cores'), 2)} | {_pair(acc.get('ttft_error'))} | {itl_s} "
            f"| {_pair(acc.get('request_lag'))} | {lag_s} "
            f"| {_f(st.get('p50_ms'), 1)} / {_f(st.get('p99_ms'), 1)} "
            f"| {_f(si.get('p50_ms'), 1)} / {_f(si.get('p99_ms'), 1)} "
            f"| {acc.get('matched', 0)}/{r['requests']} | {r.get('matching', '')} |"
        )
    if any(r.get("warnings") for r in rows):
        out += [
            "",
            "\\* the paced server fell behind its schedule in this run (its own TTFT / ITL "
            "above): the host is saturated by server + client, so its TTFT and ITL are not "
            "the configured 50 / 10 ms there; the errors are still measured against the times "
            "it really wrote each chunk.",
        ]
    return "\n".join(out)


WORKLOAD_ORDER = ["random", "shared-prefix", "multi-turn"]


def _median(xs: list[float]) -> float | None:
    s = sorted(x for x in xs if x is not None)
    if not s:
        return None
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2


def _spread(xs: list[float], digits: int = 2, suffix: str = "") -> str:
    """median, and [min-max] when there are several."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    med = _median(xs)
    text = f"{med:.{digits}f}{suffix}"
    if len(xs) > 1:
        text += f" [{min(xs):.{digits}f}-{max(xs):.{digits}f}]"
    return text


def _ratios(rows: list[dict[str, Any]], kind: str, key: str) -> list[float]:
    """Per rep: `kind`'s `key` over the same rep's random one."""
    base = {r["rep"]: r.get(key) for r in rows if r["prompts"] == "random"}
    out = []
    for r in rows:
        b = base.get(r["rep"])
        if r["prompts"] == kind and b and r.get(key) is not None:
            out.append(r[key] / b)
    return out


def workloads_table(results: dict[str, Any]) -> str:
    """reportgen alone at one level: random, shared-prefix and multi-turn, side by side."""
    rows = [r for r in results["runs"] if r["workload"] == "workloads" and r.get("ok")]
    failed = [r for r in results["runs"] if r["workload"] == "workloads" and not r.get("ok")]
    if not rows and not failed:
        return ""
    w = results["plan"].get("workloads", {})
    reps = len({r["rep"] for r in rows})
    out = [
        f"Workloads, reportgen alone at C={w.get('concurrency')} against the paced server "
        f"(TTFT 50 ms, ITL 10 ms, {w.get('chunks')} tokens), {w.get('requests')} requests "
        f"per run, prompts of {w.get('words')} words; shared-prefix: {w.get('groups')} groups, "
        f"the first {w.get('prefix_words')} words shared; multi-turn: {w.get('turns')} turns, "
        f"think {w.get('think_s'):g} s, every turn re-sending the earlier turns and answers. "
        f"{reps} rep(s), interleaved; median [min-max] over reps. CPU: user+sys of the "
        "client's process in its measured window (own: reportgen's `client_cpu_s`, its "
        "loop thread); vs random: per rep, CPU per request over the same rep's random run. "
        "Body: the JSON body sent per request, mean / max.",
        "",
        "| workload | requests | req/s | client CPU s | CPU ms/request | vs random "
        "| own CPU ms/request | own vs random | body bytes/request | prompt chars/request "
        "| client TTFT p50 ms | server TTFT p50 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for kind in WORKLOAD_ORDER:
        mine = [r for r in rows if r["prompts"] == kind]
        if not mine:
            continue
        vs = _ratios(rows, kind, "cpu_ms_per_request")
        own_vs = _ratios(rows, kind, "own_cpu_ms_per_request")
        body = [r["body_bytes"]["mean"] for r in mine]
        top = max(r["body_bytes"]["max"] for r in mine)
        chars = [r["prompt_chars"]["mean"] for r in mine]
        ttft = [r["client_ttft"]["p50_ms"] for r in mine]
        srv = [r["server_truth"]["ttft"]["p50_ms"] for r in mine]
        out.append(
            f"| {kind} | {mine[0]['requests']} | {_spread([r['req_s'] for r in mine], 1)} "
            f"| {_spread([r['cpu_window_s'] for r in mine])} "
            f"| {_spread([r['cpu_ms_per_request'] for r in mine])} "
            f"| {_spread(vs, 2, 'x') if kind != 'random' else '1'} "
            f"| {_spread([r['own_cpu_ms_per_request'] for r in mine])} "
            f"| {_spread(own_vs, 2, 'x') if kind != 'random' else '1'} "
            f"| {_f(_median(body))} / {_f(float(top))} | {_f(_median(chars))} "
            f"| {_spread(ttft, 1)} | {_spread(srv, 1)} |"
        )
    for r in failed:
        err = str(r.get("error", ""))[:100].replace("|", "/").replace("\n", " ")
        out.append(f"| {r['prompts']} (rep {r['rep'] + 1}) | failed: {err} |||||||||||")
    if reps > 1:
        out += [
            "",
            "Each rep: CPU ms/request (window), and x random.",
            "",
            "| rep | " + " | ".join(WORKLOAD_ORDER) + " |",
            "|---:|" + "---:|" * len(WORKLOAD_ORDER),
        ]
        for rep in sorted({r["rep"] for r in rows}):
            here = {r["prompts"]: r for r in rows if r["rep"] == rep}
            base = here.get("random", {}).get("cpu_ms_per_request")
            cells = []
            for kind in WORKLOAD_ORDER:
                v = here.get(kind, {}).get("cpu_ms_per_request")
                cell = _f(v, 2)
                if v is not None and base and kind != "random":
                    cell += f" ({v / base:.2f}x)"
                cells.append(cell)
            out.append(f"| {rep + 1} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def installs_table(results: dict[str, Any]) -> str:
    out = [
        "| peer | version | works | venv size | install time | notes |",
        "|---|---|---|---:|---:|---|",
    ]
    for name, rec in results.get("installs", {}).items():
        size = rec.get("size_bytes")
        size_s = f"{size / 2**30:.1f} GiB" if size else "-"
        took = f"{rec['install_s']} s" if rec.get("install_s") else "-"
        why = str(rec.get("error", ""))[:200].replace("|", "/").replace("\n", " ")
        works = "yes" if rec.get("ok") else "no"
        out.append(
            f"| {name} | {rec.get('version') or '-'} | {works} | {size_s} | {took} | {why} |"
        )
    return "\n".join(out)


def render(results: dict[str, Any]) -> str:
    host = results["host"]
    kind = "quick" if results["quick"] else "full"
    if results.get("workloads_only"):
        kind = "workloads-only"
    head = (
        f"Host: {host['cpu']}, {host['cores']} cores, Linux {host['kernel']}, "
        f"Python {host['python']}; {kind} run, "
        f"{results.get('elapsed_s', '?')} s."
    )
    tables = [
        zero_table(results),
        paced_table(results),
        workloads_table(results),
        installs_table(results) if results.get("installs") else "",
    ]
    parts = [head]
    for table in tables:
        if table:
            parts += ["", table]
    if results.get("notes"):
        parts.append("")
    for note in results.get("notes", []):
        parts.append(f"- note: {note}")
    return "\n".join(parts)
