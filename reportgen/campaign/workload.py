"""The [workload] table: the load at each level (closed loop or open, the amount, the lengths),
its warm-up, repetitions and service-level objectives, and a search for the highest load
that meets them."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from reportgen.campaign.base import DEFAULT_REQUESTS_PER_LEVEL, _Model, rate_kept
from reportgen.campaign.levels import Point
from reportgen.campaign.prompts import PromptSource

# re-exported: run.session imports it from here
from reportgen.campaign.workload_tables import FindMax as FindMax
from reportgen.campaign.workload_tables import Repetitions, Slo, SteadyWarmup
from reportgen.redact import is_secret_name

# What reportgen sends in every request body itself (``load.records.RequestSpec.body``): not
# for ``extra_body``, which would change what is measured behind its back
RESERVED_BODY = frozenset(
    {"model", "messages", "prompt", "stream", "stream_options", "max_tokens",
     "max_completion_tokens", "min_tokens", "ignore_eos"}
)  # fmt: skip


def repetitions_bounds(repetitions: object) -> tuple[int, int]:
    """(min, max) of a workload's repetitions as a run saved or a campaign gives them (a
    number, ``{min, max}`` or ``Repetitions``): a number is both."""
    if isinstance(repetitions, dict):
        low = int(repetitions.get("min") or 1)
        return low, int(repetitions.get("max") or low)
    if hasattr(repetitions, "min") and hasattr(repetitions, "max"):
        return int(repetitions.min), int(repetitions.max)
    n = int(repetitions) if isinstance(repetitions, int | float | str) else 1
    return n, n


def repetitions_range(value: int | Repetitions) -> tuple[int, int]:
    """(min, max) of a workload's repetitions; a number is both."""
    if isinstance(value, Repetitions):
        return value.min, value.max
    return int(value), int(value)


def resolve_trim(trim: bool | None, duration_s: float | None) -> bool:
    """``workload.trim`` as it applies: as written, else on for duration levels (a level of
    fixed length whose ramp-up and drain would otherwise count) and off for request-count
    levels (whose every request is the measurement). The one place this rule lives."""
    return bool(trim) if trim is not None else duration_s is not None


class Workload(_Model):
    api: Literal["chat", "completions"] = "chat"
    stream: bool = Field(True, description="Stream responses (needed for TTFT and ITL).")
    concurrency: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=lambda: [1],
        min_length=1,
        description="Levels: clients in a closed loop, or the in-flight cap with request_rate "
        "(0: no cap; the default where the rates are the levels).",
    )
    request_rate: float | list[float] | None = Field(
        None,
        description="Open loop: requests per second, or inf for every request of a level at "
        "once, at most C in flight (default: closed loop). A list makes its rates the "
        "levels, e.g. [1, 2, 4, inf], at one concurrency cap.",
    )
    arrival: Literal["poisson", "constant"] = Field(
        "poisson", description="Open loop: exponential (seeded) or constant gaps."
    )
    burstiness: float = Field(
        1.0,
        gt=0,
        allow_inf_nan=False,
        description="Open loop, Poisson arrivals: gamma-distributed gaps of this shape and "
        "the rate's mean gap, as vLLM's --burstiness: 1 is a Poisson process, below 1 "
        "burstier (requests in clumps), above 1 more even.",
    )
    requests_per_level: int | None = Field(None, ge=1)
    duration_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    max_duration_s: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="Closed-loop duration levels run past duration_s, up to this long, until "
        "their output tok/s is known within the campaign's margin (the 95% interval of its "
        "windows' mean narrower than the margin); then their clients stop and the requests "
        "in flight finish. Default: 3 x duration_s; equal to duration_s: exactly duration_s.",
    )
    input_tokens: int = Field(128, ge=1)
    output_tokens: int = Field(128, ge=1)
    range_ratio: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="Lengths that vary, as vLLM's --random-range-ratio: each request's output "
        "tokens (and a random or shared-prefix prompt's input tokens) drawn uniformly from "
        "[L x (1 - r), L x (1 + r)], seeded (the same at every level and in every "
        "experiment); 0: every request the same length.",
    )
    turns: int = Field(
        1,
        ge=1,
        description="Multi-turn conversations: each client holds a conversation of this many "
        "turns, each turn sending the turns before it and their answers (the history grows "
        "by a turn's prompt and answer each time, as a chat does), then starts the next; "
        "the level's requests count turns. Closed loop only.",
    )
    think_s: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="Multi-turn: seconds a client waits after an answer before its next turn.",
    )
    find_max: FindMax | None = Field(
        None,
        description="Instead of the concurrency levels: search the highest concurrency that "
        "meets these bounds, doubling then bisecting, each probe a level with its "
        "repetitions, in one server session (closed loop only).",
    )
    prompts: PromptSource = Field(default_factory=lambda: PromptSource())  # type: ignore[call-arg]
    tokenizer: str | None = Field(
        None,
        description="Local tokenizer folder (transformers): exact prompt lengths and token "
        "counts when the server reports no usage.",
    )
    repetitions: int | Repetitions = Field(
        1,
        description="Repetitions of every level: a number, or { min, max }: min first, then, "
        "at levels where the objective's verdict is still open, one more at a time on a fresh "
        "server, up to max (each look at Pocock's level, so the error rate holds).",
    )
    warmup_requests: int = Field(
        4,
        ge=0,
        description="Requests of the first warm-up of every server (prompt lengths are "
        "corrected from it), and the fewest each level's steady warm-up sends.",
    )
    warmup: SteadyWarmup = Field(
        default_factory=lambda: SteadyWarmup(),  # type: ignore[call-arg]
        description="Each level's own warm-up, until steady (see SteadyWarmup).",
    )
    trim: bool | None = Field(
        None,
        description="Throughput from the steady state only: from when the most requests are "
        "in flight to the last moment they still are (ramp-up and drain left out). Default: "
        "on for duration_s levels, off for requests_per_level levels.",
    )
    stagger: bool = Field(
        True,
        description="Closed loop: spread the clients' first requests over one request time "
        "(client k starts k x the warm-up's median request time / C after the level's start), "
        "so they do not run in lockstep waves; false starts every client at once.",
    )
    slo: Slo = Field(default_factory=lambda: Slo())  # type: ignore[call-arg]
    fresh_server: bool = Field(
        False,
        description="Start a fresh server (and warm it up) for every repetition, so a "
        "repetition also samples start-to-start variation (memory layout, autotuning).",
    )
    prefix_cache_hit_rate: list[Annotated[float, Field(ge=0, le=1)]] | None = Field(
        None,
        min_length=2,
        max_length=2,
        description="Expected [lowest, highest] share of prompt tokens the engine serves from "
        "its prefix cache during levels. Default: at most 0.1 for random and dataset prompts "
        "(a higher rate flatters the numbers), no expectation for a fixed prompt.",
    )
    workers: int | None = Field(
        None, ge=1, description="Client processes (default: chosen from concurrency)."
    )
    seed: int = 0
    request_timeout_s: float = Field(600, gt=0, allow_inf_nan=False)
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="Sent in every request's JSON body besides what reportgen sends: sampling "
        "parameters (temperature, top_p, top_k...; reportgen's own is temperature 0) or "
        "an engine's own fields, e.g. { temperature = 0.7, top_p = 0.9 }. Not model, "
        "messages, prompt, stream or the lengths (output_tokens sets them).",
    )

    headers: dict[str, str] = Field(
        default_factory=dict,
        description="HTTP headers sent with every request (and the readiness checks), e.g. "
        '{ X-Route = "pool-a" }. Not credentials: they are written in the results and '
        "reports; a key goes in OPENAI_API_KEY (sent as a bearer token, never written).",
    )

    @field_validator("headers")
    @classmethod
    def _plain_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            if not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", name):
                raise ValueError(f"{name!r} is not a header name (letters, digits, '-')")
            if any(c in value for c in "\r\n\0"):
                raise ValueError(f"{name}: a header value is one line")
            if is_secret_name(name) or name.lower() == "cookie":
                raise ValueError(
                    f"{name}: its value would be written in the results and reports; send a "
                    "key with OPENAI_API_KEY (a bearer token, never written) instead"
                )
        return headers

    @field_validator("extra_body")
    @classmethod
    def _not_reportgens(cls, body: dict[str, Any]) -> dict[str, Any]:
        taken = sorted(set(body) & RESERVED_BODY)
        if taken:
            raise ValueError(
                f"{', '.join(taken)}: reportgen sets these itself (the lengths through "
                "output_tokens, which asks the engine for exactly that many); remove them"
            )
        return body

    @model_validator(mode="before")
    @classmethod
    def _default_amount(cls, data: Any) -> Any:
        """Neither requests_per_level nor duration_s given: 64 requests per level."""
        if (
            isinstance(data, dict)
            and data.get("requests_per_level") is None
            and data.get("duration_s") is None
        ):
            return {**data, "requests_per_level": DEFAULT_REQUESTS_PER_LEVEL}
        return data

    @field_validator("request_rate", mode="before")
    @classmethod
    def _rates(cls, value: Any) -> Any:
        """A positive number (inf allowed), or a list of them, unique: one clear error."""
        if value is None:
            return None
        many = isinstance(value, list)
        values = value if many else [value]
        out = []
        for v in values:
            if isinstance(v, str) and v.strip().lower() in ("inf", "infinity"):
                v = math.inf
            if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:
                raise ValueError(
                    f"{v!r} is not a request rate: give requests per second above 0 (inf: "
                    "every request at once), or a list of them such as [1, 2, 4, inf]"
                )
            out.append(float(v))
        if many and not out:
            raise ValueError("give at least one rate, e.g. [1, 2, 4, inf]")
        if len(set(out)) != len(out):
            raise ValueError(f"rates must be unique, got {value}")
        return out if many else out[0]

    @property
    def rates(self) -> list[float] | None:
        """The rates that are the levels (``request_rate`` as a list), or None."""
        return self.request_rate if isinstance(self.request_rate, list) else None

    @property
    def points(self) -> list[Point]:
        """The levels to run, in order (a search's are found as it goes: none here)."""
        if self.rates is not None:
            return [Point(self.concurrency[0], r) for r in self.rates]
        return [Point(c) for c in self.concurrency]

    def rate_at(self, point: Point) -> float | None:
        """The request rate a level runs at: its own, the workload's one, or None (closed)."""
        if point.rate is not None:
            return point.rate
        return self.request_rate if isinstance(self.request_rate, float) else None

    @property
    def open_loop(self) -> bool:
        over = self.find_max.over if self.find_max is not None else None
        return self.request_rate is not None or over == "request_rate"

    @model_validator(mode="after")
    def _levels_unique(self) -> Workload:
        over_rates = self.find_max is not None and self.find_max.over == "request_rate"
        if "concurrency" not in self.model_fields_set and (self.rates is not None or over_rates):
            # rates as the levels and no concurrency given: no cap on requests in flight, as
            # the peers' rate sweeps have it (left out of the fields set: a default still)
            self.__dict__["concurrency"] = [0]
        if len(set(self.concurrency)) != len(self.concurrency):
            raise ValueError("concurrency levels must be unique")
        if self.requests_per_level is not None and self.duration_s is not None:
            raise ValueError("give requests_per_level or duration_s, not both")
        one = self.request_rate
        rates = self.rates or ([one] if isinstance(one, float) else [])
        if math.inf in rates and self.duration_s is not None:
            raise ValueError(
                "request_rate = inf sends a level's requests all at once, so it needs "
                "requests_per_level; with duration_s leave request_rate out (a closed loop "
                "keeps C requests in flight)"
            )
        if 0 in self.concurrency and self.rates is None and not over_rates:
            raise ValueError(
                "concurrency 0 (no cap on requests in flight) is for rate levels: write "
                "request_rate as a list, such as [2] or [1, 2, inf], or give concurrency "
                "levels of at least 1"
            )
        if self.rates is not None and len(self.concurrency) != 1:
            raise ValueError(
                "request_rate as a list makes its rates the levels, at one cap on requests "
                f"in flight: give one concurrency value (got {self.concurrency}), or leave "
                "concurrency out for no cap"
            )
        src = self.prompts
        find = self.find_max
        if find is not None and find.over == "request_rate":
            if self.request_rate is not None or len(self.concurrency) != 1:
                raise ValueError(
                    'find_max over = "request_rate" chooses the rates: leave out '
                    "request_rate, and give at most one concurrency (the cap on requests in "
                    "flight; none if left out)"
                )
            if src.source == "trace" or self.turns > 1 or isinstance(self.repetitions, Repetitions):
                raise ValueError(
                    "find_max searches with fixed repetitions and generated arrivals: leave "
                    "out trace prompts, turns and adaptive repetitions"
                )
        elif find is not None and (
            self.request_rate is not None
            or src.source == "trace"
            or isinstance(self.repetitions, Repetitions)
        ):
            raise ValueError(
                "find_max searches concurrency levels of a closed loop with fixed "
                "repetitions: leave out request_rate, trace prompts and adaptive repetitions "
                '(over = "request_rate" searches rates)'
            )  # fmt: skip
        if self.turns > 1 and (self.request_rate is not None or src.source == "trace"):
            raise ValueError(
                "turns > 1: conversations run in a closed loop (each client waits for an "
                "answer before its next turn), so leave out request_rate and trace prompts"
            )
        if src.source == "trace" and self.request_rate is not None:
            raise ValueError(
                'prompts.source = "trace" replays the trace\'s own arrival times: remove '
                "request_rate (workload.concurrency caps the requests in flight)"
            )
        if src.source == "shared-prefix" and (src.prefix_tokens or 0) >= self.input_tokens:
            raise ValueError(
                f"prompts.prefix_tokens ({src.prefix_tokens}) must be below input_tokens "
                f"({self.input_tokens}): each request adds its own text after the prefix"
            )
        return self

    @field_validator("repetitions", mode="before")
    @classmethod
    def _repetitions(cls, value: Any) -> Any:
        """One clear error for either form (a union would report both)."""
        if isinstance(value, dict):
            try:
                return Repetitions(**value)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(x) for x in first["loc"])
                msg = str(first["msg"]).removeprefix("Value error, ")
                raise ValueError(f"{where + ': ' if where else ''}{msg}") from None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(
                "give a whole number of at least 1, or a range such as { min = 2, max = 8 }"
            )
        return value

    @property
    def trims(self) -> bool:
        """Whether throughputs are trimmed to the steady state (``resolve_trim``)."""
        return resolve_trim(self.trim, self.duration_s)

    @field_serializer("request_rate")
    def _rate_kept(self, rate: float | list[float] | None) -> Any:
        # JSON has no infinity: "inf" (read back as one), never null, which is a closed loop
        if rate is None:
            return None
        return [rate_kept(r) for r in rate] if isinstance(rate, list) else rate_kept(rate)

    @field_serializer("trim")
    def _trim_resolved(self, trim: bool | None) -> bool:
        # Saved as it applies: results, plans and resume compare the resolved value.
        return resolve_trim(trim, self.duration_s)

    @field_validator("prefix_cache_hit_rate")
    @classmethod
    def _low_high(cls, rate: list[float] | None) -> list[float] | None:
        if rate is not None and rate[0] > rate[1]:
            raise ValueError("[lowest, highest]: the lowest comes first")
        return rate
