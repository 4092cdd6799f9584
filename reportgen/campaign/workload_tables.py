"""The [workload] table's own tables: each level's steady warm-up (``warmup``), the
service-level objectives (``slo``), the search for the highest load (``find_max``) and adaptive
repetitions (``repetitions = { min, max }``)."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from reportgen.campaign.base import _Model


class SteadyWarmup(_Model):
    """Before a level's first repetition on a server: the level's own load (its concurrency,
    or its rate) until the server is steady there, in consecutive windows of output tokens by
    their arrival time; the warm-up's requests are discarded."""

    steady: bool = Field(
        True,
        description="Warm every level up at its own load until the last `windows` windows "
        "agree on output tok/s and time per output token within `tolerance`, or `max_s` has "
        "passed; false: only the campaign's first warm-up (warmup_requests), as before.",
    )
    tolerance: float = Field(
        0.05,
        gt=0,
        lt=1,
        description="Largest (max - min) / mean of the last windows' output tok/s and of "
        "their time per output token for the level to count as steady.",
    )
    windows: int = Field(3, ge=2, le=20, description="Consecutive windows that must agree.")
    window_s: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="Length of a window in seconds (default: the warm median request time, "
        "at least 0.25 s, so batches that finish together in waves do not set the count).",
    )
    max_s: float = Field(
        120.0,
        gt=0,
        allow_inf_nan=False,
        description="Most seconds a level warms up; a level still not steady then is "
        "measured and marked so.",
    )


class Slo(_Model):
    """Service-level objectives: a request counts toward goodput when it meets every one set."""

    ttft_ms: float | None = Field(None, gt=0, allow_inf_nan=False)
    tpot_ms: float | None = Field(None, gt=0, allow_inf_nan=False)
    e2e_ms: float | None = Field(None, gt=0, allow_inf_nan=False)


class FindMax(_Model):
    """Search the highest concurrency (or request rate) that meets latency bounds, instead
    of fixed levels."""

    slo: str = Field(
        description="Bounds every probed level must meet, as metric.stat<value joined by "
        "commas: ttft_ms.p99<500,itl_ms.p99<50 (latencies at p50, p90, p95, p99 or mean; a "
        "throughput without a stat, output_tok_s>1000); a level also fails if more than 1% "
        "of its requests fail. A latency is taken over the requests of all the level's "
        "repetitions together (p99: 99 of 100 of them), a throughput as their mean.",
    )
    over: Literal["concurrency", "request_rate"] = Field(
        "concurrency",
        description="What the search varies: the concurrency of a closed loop, or the "
        "request rate of an open loop (workload.concurrency then caps requests in flight; "
        "none by default).",
    )
    start: int | float = Field(
        1, gt=0, allow_inf_nan=False, description="The first concurrency (or rate) probed."
    )
    max: int | float = Field(
        1024, gt=0, allow_inf_nan=False, description="The highest concurrency (or rate) probed."
    )
    probes: int = Field(
        8, ge=1, le=50, description="Most levels run: doubling from start, then bisecting."
    )
    tolerance: float = Field(
        0.1,
        gt=0,
        lt=1,
        description="Stop bisecting when the highest pass and the lowest failure are this "
        "close (relative), or adjacent.",
    )
    repeat_near: bool = Field(
        True,
        description="Run a probe's repetitions once more when a bound's value lies inside the "
        "95% interval of what it is judged on (pass or fail within noise: a latency's "
        "percentile over the requests of all its runs, its runs resampled; a throughput's "
        "mean over them), and decide on all of them.",
    )

    confirm: bool = Field(
        True,
        description="Before answering, run the boundary's two probes (the lowest failure and "
        "the highest pass) once more, after the others, and decide each on all its runs; a "
        "verdict that changes moves the search on.",
    )

    @field_validator("slo")
    @classmethod
    def _bounds(cls, value: str) -> str:
        from reportgen.campaign.bounds import parse

        parse(value)  # ValueError: the bound that is wrong, and how to write one
        return value

    @model_validator(mode="before")
    @classmethod
    def _whole(cls, data: Any) -> Any:
        """A search over concurrency takes whole numbers (1.0 is 1; 1.5 is refused)."""
        if not isinstance(data, dict) or data.get("over", "concurrency") != "concurrency":
            return data
        out = dict(data)
        for key in ("start", "max"):
            value = out.get(key)
            if isinstance(value, float) and math.isfinite(value):
                if not value.is_integer():
                    raise ValueError(
                        f"{key} ({value:g}) must be a whole number when the search is over "
                        'concurrency (over = "request_rate" searches rates)'
                    )
                out[key] = int(value)
        return out

    @model_validator(mode="after")
    def _range(self) -> FindMax:
        if self.max < self.start:
            raise ValueError(f"max ({self.max:g}) is below start ({self.start:g})")
        return self


class Repetitions(_Model):
    """Adaptive repetitions: ``min`` for every level, up to ``max`` where still undecided."""

    min: int = Field(2, ge=2, description="Repetitions every level gets.")
    max: int = Field(8, ge=2, le=50, description="Most repetitions a level may get.")

    @model_validator(mode="after")
    def _order(self) -> Repetitions:
        if self.max < self.min:
            raise ValueError(f"max ({self.max}) is below min ({self.min})")
        return self
