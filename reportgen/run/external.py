"""A server reportgen did not start: already running at a URL (``server.base_url``, an
experiment's ``base_url``, ``reportgen bench URL``).

It is measured like a server reportgen started (ready when a one-token generation answers,
its info endpoints and Prometheus metrics read, the same load), but nothing is started or
stopped, no process is watched and there is no log of its own: its run directory's log file
says so. What reportgen cannot know of it (its flags, its environment, whether it restarted)
the report says it cannot vouch for.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from reportgen import engines, tls
from reportgen.engines import Engine
from reportgen.errors import ServerError
from reportgen.run.server import ServerProcess, StopReport

NOTE = (
    "reportgen did not start this server: it was already running at {url}, and reportgen "
    "sent its load there. Its own log is wherever it was started.\n"
)


# As `vllm bench serve` and the OpenAI clients: a key in this variable goes with every request
# as "Authorization: Bearer" (sent, never recorded).
API_KEY_ENV = "OPENAI_API_KEY"


# What a server reportgen did not start is asked of itself (each where it answers): vLLM's
# /version, SGLang's /server_info (its resolved arguments and version), the models served.
INFO_PATHS = ("/version", "/server_info", "/v1/models")


def auth_headers() -> dict[str, str]:
    key = os.environ.get(API_KEY_ENV, "")
    return {"Authorization": f"Bearer {key}"} if key else {}


def url_host(host: str) -> str:
    """A host as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def is_local(url: str) -> bool:
    """Whether ``url``'s host is this machine (loopback, or an address of its own: one it
    can bind to), so its GPUs are the ones NVML sees here."""
    host = urlsplit(url).hostname or ""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    for family, _, _, _, address in infos:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((address[0], 0))
            except OSError:
                continue
            return True
    return False


def split_url(url: str) -> tuple[str, int]:
    """(host, port) of ``url``, the scheme's default port where it names none."""
    parts = urlsplit(url)
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


class ExternalServer(ServerProcess):
    """A running server at ``url`` (http://host:port, with a path prefix where the API is
    served under one; a trailing /v1 is the API's own and is left out)."""

    running_before = True  # a 404 to its readiness request will not go away by waiting

    def __init__(
        self,
        url: str,
        *,
        log_path: Path,
        engine: Engine,
        headers: dict[str, str] | None = None,
        secrets: Sequence[str] = (),
    ) -> None:
        url = url.rstrip("/")
        self.url = url.removesuffix("/v1")
        host, port = split_url(self.url)
        super().__init__(
            [],
            env={},
            log_path=log_path,
            host=host,
            port=port,
            engine=engine,
            headers=headers,
            secrets=secrets,
        )

    @property
    def base_url(self) -> str:
        return self.url

    def start(self) -> None:
        """Nothing to start: the log file says so, and the ready deadline starts now."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.write_text(NOTE.format(url=self.url), encoding="utf-8")
        self.started_at = time.monotonic()

    def stop(self) -> StopReport:
        """Nothing to stop (it was running before and runs on): no signal sent."""
        return StopReport(group_gone=True, port_free=True)


def detect_engine(url: str, headers: dict[str, str], timeout_s: float = 5.0) -> tuple[str, str]:
    """Which engine serves at ``url``, from what its endpoints answer: (engine name, how it
    was told). Prometheus series named with an engine's prefix first (``Engine.metric_prefix``:
    ``vllm:``, ``sglang:``, reportgen's ``sim:``), then the paths only one engine answers
    (``Engine.detect_paths``: SGLang's /server_info, vLLM's /version); "generic" when none
    says. Raises ServerError when nothing answers there at all."""
    base = url.rstrip("/").removesuffix("/v1")
    failures: list[httpx.HTTPError] = []
    answered = 0  # GETs answered at all, any status
    with httpx.Client(
        base_url=base, headers=headers, timeout=timeout_s, verify=tls.context()
    ) as client:

        def ok(path: str) -> httpx.Response | None:
            """The answer to GET ``path`` when it is 200 (any failure noted)."""
            nonlocal answered
            try:
                got = client.get(path)
            except httpx.HTTPError as exc:
                failures.append(exc)
                return None
            answered += 1
            return got if got.status_code == 200 else None

        metrics = ok("/metrics")
        series = metrics.text if metrics is not None else ""
        for e in engines.ENGINES.values():
            prefix = e.metric_prefix
            if prefix and re.search(rf"^{re.escape(prefix)}", series, re.M):
                return e.name, f"its /metrics names {prefix}* series"
        for e in engines.ENGINES.values():
            for path, word in e.detect_paths:
                got = ok(path)
                if got is not None and (word is None or word in got.text):
                    return e.name, f"it answers {path}"
        ok("/v1/models")
    if not answered:  # nothing listens there
        first = failures[0]
        if base.startswith("https://") and "WRONG_VERSION_NUMBER" in str(first):
            raise ServerError(  # a plain HTTP server asked for TLS
                f"{base} does not answer with TLS ({type(first).__name__}: {first}); a server "
                "listens there without it: write http://"
            )
        said = "start the server first, or check the address"
        if httpx.URL(base).port is None:  # http://host means port 80, which engines never use
            port = 443 if base.startswith("https://") else 80
            said += (
                f" (it names no port, so {port}: vLLM serves on 8000 by default, SGLang on "
                "30000; write http://host:PORT)"
            )
        raise ServerError(f"nothing answers at {base} ({type(first).__name__}: {first}); {said}")
    return "generic", "none of its endpoints named an engine"
