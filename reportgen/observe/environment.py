"""The environment a run happened in, typed: what ``observe.fingerprint`` collects (and the
executor adds), read through attributes by render, diff, the checks and ``--resume``.

results.json keeps the fingerprint as collected, every field best-effort: a collector that
could not read a field records ``{"error": why}`` in its place, so such fields are typed
``Any`` here and shown with ``render.text``'s ``_value``. Unknown fields (a newer collector's,
a host's own) are kept (``extra = "allow"``) and reach the report's tables all the same.

    Environment       host, software, GPUs, and how the run reached the host (``executor``)
    Gpus, GpuDevice   NVML's inventory: driver, CUDA, each GPU's name, UUID, memory, processes
    Software          reportgen's build, the serving packages, the torch stack, repositories,
                      the environment variables that change how engines run (redacted)
    Reached           over SSH or as Slurm job steps: from where, with which Python
    Node              what makes two machines' numbers comparable (``reportgen diff``'s gate)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    field_validator,
    model_validator,
)


class _Loose(BaseModel):
    """A fingerprint record: known fields typed, the rest kept as collected."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    _order: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _keep_order(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        model = handler(data)
        if isinstance(data, Mapping):
            model._order = tuple(str(k) for k in data)
        return model

    def fields(self) -> dict[str, Any]:
        """Every field as recorded (known and unknown, in the collector's order), none that
        was not."""
        dumped = self.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return {k: dumped[k] for k in self._order if k in dumped} | dumped


def _mappings(value: Any) -> Any:
    """A list of records with anything that is not one dropped (a damaged file's)."""
    return [x for x in value if isinstance(x, Mapping)] if isinstance(value, list) else []


class GpuDevice(_Loose):
    index: Any = None
    name: Any = None
    uuid: Any = None
    compute_capability: Any = None
    memory_total_bytes: Any = None
    memory_used_bytes: Any = None
    power_limit_w: Any = None
    processes: Any = None


class Gpus(_Loose):
    """NVML's inventory (``observe.nvml``), or why there is none (``available`` False)."""

    available: bool | None = None
    reason: Any = None
    error: Any = None
    driver: Any = None
    nvml_version: Any = None
    cuda_driver: Any = None
    cuda_driver_version: Any = None
    count: Any = None
    topology: Any = None
    # a capture's facts replayed (``sources.FakeSource``), not this host's GPUs: what it says
    replayed: Any = None
    devices: list[GpuDevice] = Field(default_factory=list)

    _devices = field_validator("devices", mode="before")(_mappings)

    @property
    def uuids(self) -> list[str]:
        return [str(d.uuid) for d in self.devices if d.uuid]

    def summary(self) -> str:
        """ "8 x NVIDIA H200 (compute capability 9.0)", or why there are none."""
        if not self.devices:
            return "no GPUs" if self.available is not False else "no GPUs (NVML unavailable)"
        kinds: dict[str, int] = {}
        for d in self.devices:
            name = f"{d.name} (compute capability {d.compute_capability})"
            kinds[name] = kinds.get(name, 0) + 1
        return ", ".join(f"{n} x {name}" for name, n in sorted(kinds.items()))

    def mismatches(self, expect: Mapping[str, Any]) -> list[str]:
        """What differs between a campaign's ``host.expect`` and these GPUs (empty: all
        matches, or nothing expected)."""
        out: list[str] = []
        if not any(v is not None for v in expect.values()):
            return out
        devices = self.devices if self.available else []
        if not self.available:
            out.append(f"no GPUs visible ({self.reason or 'unknown reason'})")
        count = expect.get("gpu_count")
        if count is not None and len(devices) != count and self.available:
            out.append(f"expected {count} GPUs, found {len(devices)}")
        cc = expect.get("compute_capability")
        if cc is not None:
            seen = sorted({str(d.compute_capability) for d in devices})
            if devices and seen != [cc]:
                out.append(f"expected compute capability {cc}, found {', '.join(seen)}")
        name = expect.get("gpu_name")
        if name is not None:
            names = sorted({str(d.name) for d in devices})
            if devices and not all(name.lower() in n.lower() for n in names):
                out.append(f"expected GPU name containing {name!r}, found {', '.join(names)}")
        return out


class Host(_Loose):
    """The machine (``fingerprint.host``); its other fields vary with what the OS shows."""

    hostname: Any = None
    cpu_model: Any = None


class Build(_Loose):
    version: Any = None
    commit: Any = None
    dirty: Any = None


class Repo(_Loose):
    path: Any = None
    commit: Any = None
    dirty: Any = None
    changed_files: Any = None
    error: Any = None


class Software(_Loose):
    reportgen: Build = Field(default_factory=Build)
    packages: dict[str, Any] = Field(default_factory=dict)
    installed_packages_count: Any = None
    installed_packages_sha256: Any = None
    torch_stack: Any = None
    repos: list[Repo] = Field(default_factory=list)
    env: dict[str, Any] = Field(default_factory=dict)

    _repos = field_validator("repos", mode="before")(_mappings)


class Reached(_Loose):
    """How the run reached the host that measured (``run.executor``'s record)."""

    kind: Any = None  # "ssh" or "slurm"
    host: Any = None
    from_: Any = Field(default=None, alias="from")
    python: Any = None
    reportgen: Any = None
    ssh_rtt_ms: Any = None
    partition: Any = None
    gpus: Any = None
    time: Any = None


class Node(_Loose):
    """What makes two machines' numbers comparable: the GPUs' model and count, the driver,
    the packages that serve (an experiment run on a node of its own records its own)."""

    gpus: Any = None
    driver: Any = None
    packages: dict[str, Any] = Field(default_factory=dict)
    # the GPUs' UUIDs: which machine, not which kind (never a mismatch: two nodes of one
    # kind differ in them); None where not recorded (before reportgen sent them)
    uuids: list[str] | None = None

    def mismatches(self, reference: Node) -> list[str]:
        """How this node differs from the run's reference one, in words."""
        out = [
            f"{label} {mine} (the run's: {theirs})"
            for label, mine, theirs in (
                ("GPUs", self.gpus, reference.gpus),
                ("driver", self.driver, reference.driver),
            )
            if mine != theirs
        ]
        for name in sorted(set(reference.packages) | set(self.packages)):
            if reference.packages.get(name) != self.packages.get(name):
                out.append(
                    f"{name} {self.packages.get(name)} (the run's: {reference.packages.get(name)})"
                )
        return out


class Environment(_Loose):
    host: Host = Field(default_factory=Host)
    software: Software = Field(default_factory=Software)
    gpus: Gpus = Field(default_factory=Gpus)
    executor: Reached | None = None

    @field_validator("host", "software", "gpus", mode="before")
    @classmethod
    def _record(cls, value: Any) -> Any:
        return value if isinstance(value, Mapping) else {}

    @field_validator("executor", mode="before")
    @classmethod
    def _reached(cls, value: Any) -> Any:
        return value if isinstance(value, Mapping) else None

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> Environment:
        """The fingerprint as recorded (a dict), typed."""
        return cls.model_validate(dict(data or {}))

    @property
    def node(self) -> Node:
        return Node(
            gpus=self.gpus.summary(),
            driver=self.gpus.driver,
            packages=dict(self.software.packages),
            uuids=self.gpus.uuids,
        )
