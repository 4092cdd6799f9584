"""Where a campaign runs: the [host] table (here, a GPU host over SSH, a Slurm cluster) and
what the host is expected to be."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    model_validator,
)

from reportgen.campaign.base import _Model


class HostExpect(_Model):
    gpu_count: int | None = Field(None, ge=0, description="Number of visible GPUs required.")
    compute_capability: str | None = Field(
        None, pattern=r"^\d+\.\d+$", description='e.g. "9.0" (Hopper), "12.0".'
    )
    gpu_name: str | None = Field(None, description="Substring the GPU name must contain.")


class _FarSide(_Model):
    """What every executor that runs elsewhere needs there (``run.remote``)."""

    python: str = Field(
        "python3",
        description="The Python there with this version of reportgen installed (a virtual "
        "environment's bin/python, say).",
    )
    dir: str | None = Field(
        None,
        description="The folder there that the campaign's relative paths (prompts, model, "
        "tokenizer) are read from (default: the campaign file's folder, at the same path: "
        "the same checkout, or a shared file system).",
    )
    workdir: str = Field(
        "~/.cache/reportgen/remote",
        description="Where an experiment's files are kept there until they are sent back.",
    )


class SshHost(_FarSide):
    """The GPU host reached over SSH (``host.executor = "ssh"``): the servers and the load
    generator run there, the run directory stays here."""

    host: str = Field(
        pattern=r"^[A-Za-z0-9_.@:\[\]-]+$",
        description="The GPU host as ssh takes it: a name or address, user@host, or a Host of "
        "~/.ssh/config.",
    )
    user: str | None = Field(None, description="Login name (default: ssh's).")
    port: int | None = Field(None, ge=1, le=65535, description="SSH port (default: ssh's).")
    identity_file: str | None = Field(None, description="Private key (default: ssh's).")
    options: list[str] = Field(
        default_factory=list,
        description='More ssh options, e.g. ["-o", "ProxyJump=bastion"].',
    )


class SlurmHost(_FarSide):
    """A Slurm cluster (``host.executor = "slurm"``): each experiment is one job step on a
    node the cluster gives (``srun``), the run directory stays where ``reportgen run`` was
    typed (a login node, say)."""

    python: str = Field(
        "",
        description="The Python on the nodes with this version of reportgen installed "
        "(default: the one running reportgen here, at the same path: a shared file system).",
    )
    partition: str | None = Field(None, description="Partition (default: the cluster's).")
    gpus: int | None = Field(None, ge=0, description="GPUs per job (--gres=gpu:N).")
    time: str | None = Field(
        None,
        pattern=r"^(\d+-)?\d+(:\d\d){0,2}$",
        description='Time limit per experiment, as Slurm writes it ("90", "1:30:00").',
    )
    options: list[str] = Field(
        default_factory=list,
        description='More srun options, e.g. ["--account=perf", "--exclusive"].',
    )


class Price(_Model):
    """What the serving host costs: per hour whole, or per GPU-hour (times the GPUs it has)."""

    per_hour: float | None = Field(
        None, gt=0, allow_inf_nan=False,
        description="What the serving host costs an hour, GPUs and all (e.g. 27.5).",
    )  # fmt: skip
    per_gpu_hour: float | None = Field(
        None, gt=0, allow_inf_nan=False,
        description="What one GPU costs an hour; times host.expect.gpu_count, else the GPUs "
        "the run saw.",
    )  # fmt: skip
    currency: str = Field("USD", min_length=1, max_length=8, description='e.g. "USD", "EUR".')
    source: str = Field(
        ..., min_length=1,
        description="Where the price came from (a provider's list price and its date, say): "
        "the report quotes it.",
    )  # fmt: skip

    @model_validator(mode="after")
    def _one_rate(self) -> Price:
        if (self.per_hour is None) == (self.per_gpu_hour is None):
            raise ValueError("give one of per_hour (the whole host) or per_gpu_hour")
        return self


class Host(_Model):
    executor: Literal["local", "ssh", "slurm"] = Field(
        "local",
        description="Where servers and load run: here (local), on host.ssh's host over SSH, "
        "or as Slurm job steps (host.slurm); the run directory and the report stay here.",
    )
    ssh: SshHost | None = Field(None, description='The GPU host, for executor = "ssh".')
    slurm: SlurmHost | None = Field(
        None, description='The cluster\'s settings, for executor = "slurm".'
    )
    expect: HostExpect = Field(default_factory=lambda: HostExpect())  # type: ignore[call-arg]
    price: Price | None = Field(
        None,
        description="What the serving host costs, for the cost per million tokens of each "
        'level: { per_gpu_hour = 3.2, source = "..." } or { per_hour = 25.6, ... }.',
    )
    repos: list[str] = Field(
        default_factory=list,
        description="Git checkouts whose commit and uncommitted changes the run records (an "
        "engine built from source, say); relative to the campaign file.",
    )

    @model_validator(mode="after")
    def _ssh_given(self) -> Host:
        if self.executor == "ssh" and self.ssh is None:
            raise ValueError(
                'executor = "ssh" needs host.ssh = { host = "gpu-box" } (the host to run on)'
            )
        return self
