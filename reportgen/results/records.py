"""An experiment's smaller records (``model.Experiment`` holds them): its flags against its
parent's, its server's readiness, warm-up and stop, why it failed, the looks of adaptive
repetitions, the golden prompts' answers, its GPU sampling and where it ran."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from reportgen.campaign.levels import Point, PointField
from reportgen.results.base import _AsGiven, _Model


class FlagChange(_Model):
    """One server flag that differs from the parent's (values redacted)."""

    key: str
    kind: Literal["added", "removed", "changed"]
    before: Any = None
    after: Any = None


class ConfigChange(_Model):
    """One setting of the engine's resolved configuration (as its log printed it) that differs
    from the parent's, though no changed flag names it (``analysis.engine_config``)."""

    key: str
    before: Any = None
    after: Any = None


class Stop(_Model):
    """How a server was stopped (``run.server.StopResult``)."""

    signals: list[str] = Field(default_factory=list)
    exit_code: int | None = None
    stop_s: float = 0.0
    group_gone: bool = False
    port_free: bool = False


class Warmup(_Model):
    requests: int = 0
    errors: int = 0
    duration_s: float = 0.0
    words_per_token: float | None = None  # prompt words per token after the correction


class Ready(_Model):
    """How the server became ready: seconds, the model it serves, the checks it answered."""

    ready_s: float | None = None
    model: str | None = None
    health_checks: int = 0
    generation_checks: int = 0


FailureKind = Literal["start", "not ready", "exited", "fatal", "other"]


class Failure(_Model):
    """Why an experiment failed, as data (its ``reason`` says it in words): what happened,
    the server's exit code where it exited, and the level run and repetition it failed
    during, where it failed during one."""

    # "start": could not be started; "not ready": never became ready; "exited": its process
    # ended; "fatal": it logged a line its engine calls fatal and could no longer generate;
    # "other": any other failure (a check, the load, the host)
    kind: FailureKind = "other"
    exit_code: int | None = None
    level: PointField | None = None
    repetition: int | None = None  # from 0

    @classmethod
    def of(cls, exc: BaseException) -> Failure:
        """What an exception says of the failure (``errors.ServerError`` carries it all)."""
        said = getattr(exc, "kind", "other")
        kinds: tuple[FailureKind, ...] = ("start", "not ready", "exited", "fatal")
        kind: FailureKind = next((k for k in kinds if k == said), "other")
        level = getattr(exc, "level", None)
        return cls(
            kind=kind,
            exit_code=getattr(exc, "exit_code", None),
            level=level if isinstance(level, Point) else None,
            repetition=getattr(exc, "repetition", None),
        )


class Look(_Model):
    """One look of adaptive repetitions: after ``repetitions`` of every level still in play,
    the objective's levels whose verdict was still open (each gets one more, on a fresh
    server, unless ``repetitions`` is the campaign's max)."""

    repetitions: int
    open: list[PointField] = Field(default_factory=list)


class ProbeAnswer(_Model):
    """One golden prompt's answer (``run.probes``)."""

    prompt: str
    expect: Any = None
    answer: str | None = None
    finish_reason: str | None = None
    output_tokens: int | None = None
    latency_s: float | None = None
    error: str | None = None


class TelemetryInfo(_Model):
    """How an experiment's GPU sampling went (its rows are in telemetry/<id>.parquet)."""

    hz: float | None = None
    rows: int = 0
    late_samples: int = 0
    error: str | None = None


class RanOn(_AsGiven):
    """Where an experiment ran when not where reportgen ran (``host.executor``): the host, a
    Slurm job's id and node, the nodes of one server across several, and the node's
    fingerprint (``run.remote``)."""

    host: str | None = None
    slurm_job: str | None = None
    node: str | None = None
    nodes: list[str] | None = None
    fingerprint: dict[str, Any] | None = None

    @property
    def name(self) -> str | None:
        """The node's name, else the host's."""
        return self.node or self.host


def value_text(value: Any) -> str:
    """A setting's value, short: a long list as its length and ends."""
    if isinstance(value, list | tuple) and len(value) > 6:
        return f"{len(value)} values, {value[0]}..{value[-1]}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10_000:
        return f"{value:,}"
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."
