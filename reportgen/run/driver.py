"""Drive one experiment's workload against a ready server: warm-up, then each level.

The driver owns what turns a workload description into requests and requests into a level's
record: the prompts (synthetic, dataset or fixed; exact with a local tokenizer, otherwise
corrected after warm-up from the server's own prompt token counts), token counts where the
server reports none, the client's CPU use, whether the client itself was the limit, and how a
closed loop's clients start (staggered by one request time over the clients, measured at
warm-up, so that they do not run in lockstep waves).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reportgen.analysis import steady
from reportgen.analysis.summary import applied_slo, summarize
from reportgen.campaign import Workload
from reportgen.campaign.base import DEFAULT_MARGIN
from reportgen.load import loadgen, prompts, trace
from reportgen.load.loadgen import LevelRun, RequestRecord, RequestSpec
from reportgen.load.tokens import Tokenizer
from reportgen.results.levels import ClientLoad, Level, Settle, Stagger, Window
from reportgen.results.model import Point, Warmup

PROMPT_POOL = 4096  # prompts generated per level in duration mode (reused cyclically)
CLIENT_LIMIT = 0.8  # a level above this share of the client's ceiling is client-limited
FULL_TEXT = 10**7  # characters of output kept per request when a tokenizer must count them
# A duration level's clients all start within this share of it: a long request time must not
# leave most of a short level to the ramp-up.
SYNTHETIC = ("random", "shared-prefix")  # prompt sources reportgen writes to a length
STAGGER_SHARE = 0.25


@dataclass(frozen=True)
class Batch:
    """A level's requests: prompts, each one's output tokens where they vary, and its send
    times where a trace gives them (None: the load's own loop, closed or at request_rate)."""

    prompts: Sequence[str]
    outputs: list[int] | None = None
    schedule: list[float] | None = None


class Driver:
    def __init__(
        self,
        workload: Workload,
        base_url: str,
        spec: RequestSpec,
        *,
        campaign_dir: Path,
        tokenizer: Tokenizer | None,
        ceiling: dict[str, Any] | None,
        on_request: Callable[[RequestRecord], None],
        margin: float = DEFAULT_MARGIN,
    ) -> None:
        self.wl = workload
        self.margin = margin  # a duration level runs on until known within it
        self.base_url = base_url
        self.spec = spec
        self.campaign_dir = campaign_dir
        self.tokenizer = tokenizer
        self.ceiling = ceiling
        self.on_request = on_request
        self.words_per_token = 1.0
        self._dataset: list[tuple[str, str | None]] | None = None
        self._trace: list[trace.TraceRow] | None = None
        self._asked: list[int] = []  # input tokens each prompt of the last batch asked for
        # The median request time (s) staggered starts are spaced by, and where it was
        # measured: the warm-up, else (no warm-up) the level run just before.
        self.request_s: float | None = None
        self.request_measured = ""
        self.request_warm = False  # measured in a warm-up (a level's own, or the first)

    # -- prompts -------------------------------------------------------------------------

    def batch(
        self, requests: int | None, duration_s: float | None, seed: int, timed: bool = True
    ) -> Batch:
        """What a level sends: a trace's window, replayed at its times when ``timed`` (the
        warm-up sends its first requests untimed); else ``requests`` prompts (a pool of
        PROMPT_POOL for a duration) sent as the load's loop sends them."""
        src = self.wl.prompts
        if src.source != "trace":
            return Batch(*self.requests(requests or PROMPT_POOL, seed))
        if self._trace is None:
            self._trace = trace.load(self._path(str(src.path)), src.time_scale)
        rows = trace.window(self._trace, requests, duration_s)
        self._asked = [r.input_tokens for r in rows]
        texts = trace.prompts(rows, src.block_tokens, self.words_per_token, seed)
        schedule = [r.at for r in rows] if timed else None
        return Batch(texts, [r.output_tokens for r in rows], schedule)

    def _path(self, given: str) -> Path:
        path = Path(given).expanduser()
        return path if path.is_absolute() else self.campaign_dir / path

    def requests(self, count: int, seed: int) -> tuple[Sequence[str], list[int] | None]:
        """``count`` prompts for a level (of any source but a trace: ``batch``), and each
        one's output tokens where they vary (``range_ratio``, a ShareGPT file's answer
        lengths; None: ``output_tokens`` for all). The same for a given seed in every
        experiment."""
        wl, src = self.wl, self.wl.prompts
        outputs = (
            prompts.lengths(count, wl.output_tokens, wl.range_ratio, f"out {seed}")
            if wl.range_ratio
            else None
        )
        if src.source == "fixed":
            return [str(src.text)], outputs
        if src.source in ("sharegpt", "jsonl"):
            if self._dataset is None:
                self._dataset = prompts.load_pairs(src.source, self._path(str(src.path)), src.field)
            drawn = prompts.sample(self._dataset, count, seed)
            if src.answer_lengths:
                outputs = [self._answer_tokens(answer) for _, answer in drawn]
            return [prompt for prompt, _ in drawn], outputs
        head = int(src.prefix_tokens or 1) if src.source == "shared-prefix" else 0
        # a shared prefix keeps its length: the range applies to each request's own part
        sizes = [
            head + n
            for n in prompts.lengths(count, wl.input_tokens - head, wl.range_ratio, f"in {seed}")
        ]
        self._asked = sizes
        words = [max(1, round(n * self.words_per_token)) for n in sizes]
        if src.source == "shared-prefix":
            if self.tokenizer is not None:
                return prompts.shared_prefix_exact(
                    count, sizes, head, src.groups, seed, wl.seed, self.tokenizer
                ), outputs
            head_words = max(1, round(head * self.words_per_token))
            return prompts.shared_prefix(
                count, words, head_words, src.groups, seed, wl.seed
            ), outputs
        if self.tokenizer is not None:
            return prompts.synthetic_exact(count, sizes, seed, self.tokenizer), outputs
        return prompts.synthetic(count, words, seed), outputs

    def _answer_tokens(self, answer: str | None) -> int:
        """A dataset answer's length in tokens (by the tokenizer, else characters / 4), at
        least 1 and at most ``output_tokens``; ``output_tokens`` where it has none."""
        if not answer:
            return self.wl.output_tokens
        n = len(self.tokenizer.encode(answer)) if self.tokenizer else round(len(answer) / 4)
        return max(1, min(n, self.wl.output_tokens))

    def _correct_length(self, warm: LevelRun) -> None:
        """Prompts made of words (synthetic ones without a tokenizer, a trace's always):
        scale words per token so the server sees the lengths asked for, from what it counted
        in the warm-up against what each of those requests asked for."""
        source = self.wl.prompts.source
        worded = source == "trace" or (self.tokenizer is None and source in SYNTHETIC)
        asked, seen = self._asked, [r for r in warm.records if r.input_tokens]
        if worded and asked and seen:
            want = sum(asked[r.index % len(asked)] for r in seen)
            got = sum(int(r.input_tokens or 0) for r in seen)
            self.words_per_token *= want / got if got else 1.0
            self.words_per_token = max(0.05, min(self.words_per_token, 20.0))

    # -- load ----------------------------------------------------------------------------

    def _run(
        self,
        concurrency: int,
        requests: int | None,
        duration_s: float | None,
        seed: int,
        progress: bool,
        stop_when: Callable[[], str | None] | None = None,
        stagger_s: float = 0.0,
        replay: bool = False,
        rate: float | None = None,
        until_known: Until | None = None,
    ) -> LevelRun:
        sent = self.batch(requests, duration_s, seed, timed=replay)
        on_request = self.on_request if progress else None
        if until_known is not None and sent.schedule is None and rate is None:
            duration_s = until_known.most_s
            on_request = until_known.wrap(on_request)
        return loadgen.run_load(
            self.base_url,
            self.spec,
            sent.prompts,
            concurrency,
            requests=None if sent.schedule is not None else requests,
            duration_s=None if sent.schedule is not None else duration_s,
            schedule=sent.schedule,
            rate=rate,
            arrival=self.wl.arrival,
            burstiness=self.wl.burstiness,
            seed=seed,
            timeout_s=self.wl.request_timeout_s,
            workers=self.wl.workers,
            on_request=on_request,
            stop_when=stop_when,
            stagger_s=stagger_s,
            outputs=sent.outputs,
            turns=self.wl.turns if replay else 1,
            think_s=self.wl.think_s,
            drain_when=until_known.known if until_known is not None else None,
        )

    def warmup(self) -> Warmup:
        wl = self.wl
        # a closed loop of at most the levels' concurrency (no cap: as many as it sends)
        conc = min(wl.warmup_requests, max(wl.concurrency) or wl.warmup_requests)
        warm = self._run(
            conc, wl.warmup_requests, None, wl.seed - 1, False, rate=wl.rate_at(Point(conc))
        )
        self._correct_length(warm)
        self._measured(warm, "warm-up")
        self.request_warm = self.request_s is not None
        return Warmup(
            requests=len(warm.records),
            errors=sum(x.status != "ok" for x in warm.records),
            duration_s=warm.duration_s,
            words_per_token=self.words_per_token,
        )

    def settle(self, point: Point, stop_when: Callable[[], str | None] | None = None) -> Settle:
        """A level's own warm-up (``workload.warmup``): its load, closed loop or at its rate,
        until ``steady.Watch`` finds consecutive windows that agree, ``max_s`` passes, or only
        errors come back; requests still in flight then are abandoned, and none is kept.
        Later levels are staggered by its warm request time. A rate of inf (every request at
        once) has no steady state to wait for: one pass of the level's own size."""
        wl, policy = self.wl, self.wl.warmup
        concurrency, rate = point.concurrency, wl.rate_at(point)
        seed = wl.seed * 1_000_003 + concurrency * 1_009 - 17  # never a level's own prompts
        watch = steady.Watch(
            tolerance=policy.tolerance,
            windows=policy.windows,
            window_s=policy.window_s,
            min_requests=wl.warmup_requests,
            open_loop=rate is not None or self.wl.prompts.source == "trace",
        )

        def stop() -> str | None:
            return (stop_when() if stop_when is not None else None) or watch.check()

        one_pass = rate is not None and math.isinf(rate)
        stagger = self.stagger(point)
        sent = self.batch(None, policy.max_s, seed, timed=True)
        passes = max(concurrency, wl.warmup_requests, wl.requests_per_level or 0, 1)
        lv = loadgen.run_load(
            self.base_url,
            self.spec,
            sent.prompts,
            concurrency,
            requests=passes if one_pass else None,
            duration_s=None if one_pass or sent.schedule is not None else policy.max_s,
            schedule=sent.schedule,
            rate=rate,
            arrival=wl.arrival,
            burstiness=wl.burstiness,
            seed=seed,
            timeout_s=wl.request_timeout_s,
            workers=wl.workers,
            on_request=None if one_pass else watch.add,
            stop_when=stop_when if one_pass else stop,
            stagger_s=stagger.step_s if stagger else 0.0,
            outputs=sent.outputs,
            turns=wl.turns,
            think_s=wl.think_s,
        )
        if one_pass:
            for rec in lv.records:
                watch.add(rec)
        reason: str = "one pass" if one_pass else (lv.aborted or "max_s")
        if reason not in ("steady", "errors", "one pass"):
            reason = "max_s" if lv.aborted is None else str(lv.aborted)
        got = watch.result
        request_s = watch.request_s()
        if request_s:
            self.request_s, self.request_measured = request_s, f"{point.label} warm-up"
            self.request_warm = True
        return Settle(
            concurrency=concurrency,
            rate=point.rate,
            reason=reason if reason in ("steady", "errors", "one pass", "max_s") else "max_s",  # type: ignore[arg-type]
            duration_s=lv.duration_s,
            requests=len(lv.records),
            errors=sum(r.status != "ok" for r in lv.records),
            window_s=got.window_s if got else 0.0,
            windows_tok_s=got.tok_s if got else [],
            windows_tpot_ms=got.tpot_ms if got else [],
            spread=got.spread if got else None,
            request_s=request_s,
        )

    def level(
        self,
        point: Point,
        repetition: int,
        stop_when: Callable[[], str | None] | None = None,
    ) -> tuple[Level, list[RequestRecord]]:
        """Run one level; returns its results entry and its request records. ``stop_when``
        (asked every half second) cuts it short with a reason: the level's ``aborted``."""
        wl = self.wl
        concurrency = point.concurrency
        # The same prompts for every experiment at a given level and repetition.
        seed = wl.seed * 1_000_003 + concurrency * 1_009 + repetition
        if point.rate is not None:  # a rate level: its own prompts too (inf: one seed more)
            seed += 7_919 * (1_000_000 if math.isinf(point.rate) else round(point.rate * 1_000))
        stagger = self.stagger(point)
        until = None
        if wl.duration_s is not None:
            most = wl.max_duration_s if wl.max_duration_s is not None else 3 * wl.duration_s
            if most > wl.duration_s:
                until = Until(wl.duration_s, most, self.margin)
        lv = self._run(
            concurrency,
            wl.requests_per_level,
            wl.duration_s,
            seed,
            True,
            stop_when,
            stagger_s=stagger.step_s if stagger else 0.0,
            replay=True,
            rate=wl.rate_at(point),
            until_known=until,
        )
        if not self.request_warm:
            self._measured(lv, f"{point.label} repetition {repetition + 1}")
        recs = lv.records
        for rec in recs:
            rec.concurrency, rec.rate, rec.repetition = concurrency, point.rate, repetition
            counted = rec.output_tokens_source == "chunks" and rec.status == "ok"
            if self.tokenizer is not None and counted:
                rec.output_tokens = len(self.tokenizer.encode(rec.output_text))
                rec.output_tokens_source = "tokenizer"
        slo = applied_slo(wl.model_dump())
        summary = summarize(recs, lv.duration_s, slo=slo, trim=wl.trims)
        summary.client = self._client(lv, summary.chunk_s)
        level = Level(
            concurrency=concurrency,
            rate=point.rate,
            repetition=repetition,
            started_at_unix=lv.started_at_unix,
            window=Window(t0_monotonic=lv.t0_monotonic, duration_s=lv.duration_s),
            summary=summary,
            aborted=lv.aborted,
            stagger=stagger,
            known=None if until is None or until.width is None else [until.width, self.margin],
        )
        return level, recs

    # -- staggered starts ----------------------------------------------------------------

    def _measured(self, run: LevelRun, where: str) -> None:
        """Keep the median time of a run's successful requests, to stagger later levels by."""
        times = sorted(r.end - r.start for r in run.records if r.status == "ok")
        if times:
            mid = len(times) // 2
            median = times[mid] if len(times) % 2 else (times[mid - 1] + times[mid]) / 2
            if median > 0:
                self.request_s, self.request_measured = median, where

    def stagger(self, point: Point) -> Stagger | None:
        """How a closed-loop level's clients start: each one request time over C after the
        one before (so the C clients' first requests are spread over about one request, as
        they are in the steady state), within STAGGER_SHARE of a duration level. None for an
        open loop (its arrival times say when requests go); a step of 0 when the workload
        turns staggering off or no request time was measured yet."""
        wl = self.wl
        if wl.rate_at(point) is not None:
            return None
        concurrency = point.concurrency
        if not wl.stagger or self.request_s is None:
            return Stagger(step_s=0.0)
        step = self.request_s / concurrency
        capped = False
        if wl.duration_s is not None and concurrency > 1:
            most = STAGGER_SHARE * wl.duration_s / (concurrency - 1)
            capped = step > most
            step = min(step, most)
        return Stagger(
            step_s=step,
            request_s=self.request_s,
            measured=self.request_measured,
            capped=capped,
        )

    def _client(self, lv: LevelRun, chunk_s: float | None) -> ClientLoad:
        """The client's own load: CPU used, and the share of its measured ceiling."""
        workers = max(1, lv.workers)
        cpu_s = lv.client_cpu_s
        out = ClientLoad(
            workers=workers,
            cpu_s=cpu_s,
            cpu_util=cpu_s / lv.duration_s if lv.duration_s > 0 else None,
            # How late the client's event loop woke (a direct bound on its timing error).
            loop_lag_ms=lv.loop_lag_ms,
            preopen_s=lv.preopen_s,  # connections opened before t0, outside the level
        )
        per_cpu = (self.ceiling or {}).get("chunks_per_cpu_s")
        if per_cpu:
            ceiling = float(per_cpu) * workers
            load = (chunk_s or 0.0) / ceiling if ceiling else None
            out.ceiling_chunk_s = ceiling
            out.load = load
            out.limited = bool(load is not None and load > CLIENT_LIMIT)
        return out


class Until:
    """A closed-loop duration level run until known: past ``least_s``, its clients stop once
    its output tok/s interval (``steady.interval_width``) is narrower than ``margin``; at
    ``most_s`` they stop whatever it is. Follows the level's records as they finish (``wrap``
    its ``on_request``), timed as ``steady.Watch`` times a warm-up."""

    def __init__(self, least_s: float, most_s: float, margin: float) -> None:
        self.least_s, self.most_s, self.margin = least_s, most_s, margin
        self.watch = steady.Watch(tolerance=1.0, windows=2)
        self.width: float | None = None

    def wrap(
        self, on_request: Callable[[RequestRecord], None] | None
    ) -> Callable[[RequestRecord], None]:
        def both(rec: RequestRecord) -> None:
            self.watch.add(rec)
            if on_request is not None:
                on_request(rec)

        return both

    def known(self) -> bool:
        now = self.watch.now_s()
        if now < self.least_s or not self.watch.pace.due():
            return False
        began = time.perf_counter()
        self.width = steady.interval_width(self.watch.records, now)
        self.watch.pace.ran(began)
        return self.width is not None and self.width < self.margin


def keep_text_chars(tokenizer: Tokenizer | None) -> int:
    return FULL_TEXT if tokenizer is not None else 2000
