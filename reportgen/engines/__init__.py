"""Engine adapters: how each serving engine is started, spoken to and judged ready.

Each engine is one module of this package defining ``ENGINE`` (an ``Engine``: see ``base``),
found when the package is imported; every list of engines elsewhere (the campaign's
``server.engine``, ``bench --engine``, the packages and environment variables the
fingerprint records, how a running server is recognised, which engines are primed) derives
from them. A new engine is one module here, plus its recorded fixtures in
``tests/fixtures/engines/``.
"""

from __future__ import annotations

import importlib
import pkgutil

from reportgen.engines.base import Engine, Flags, read_flags

__all__ = ["ENGINES", "Engine", "Flags", "env_prefixes", "get", "names", "packages", "read_flags"]


def _found() -> dict[str, Engine]:
    """Every module of this package that defines ``ENGINE``, by its engine's name: the
    simulator first, the engine that needs nothing of the server's last, the others in
    between by name (the order a running server is recognised in)."""
    found: dict[str, Engine] = {}
    for module in pkgutil.iter_modules(__path__):
        engine = getattr(importlib.import_module(f"{__name__}.{module.name}"), "ENGINE", None)
        if isinstance(engine, Engine):
            found[engine.name] = engine

    def rank(e: Engine) -> tuple[int, str]:
        return (0 if e.simulated else 2 if e.default_command is None else 1, e.name)

    return {e.name: e for e in sorted(found.values(), key=rank)}


ENGINES: dict[str, Engine] = _found()


def get(name: str) -> Engine:
    return ENGINES[name]


def names() -> tuple[str, ...]:
    return tuple(ENGINES)


def packages() -> tuple[str, ...]:
    """Every engine's Python distributions, once each, in the engines' order."""
    return tuple(dict.fromkeys(p for e in ENGINES.values() for p in e.packages))


def env_prefixes() -> tuple[str, ...]:
    return tuple(dict.fromkeys(p for e in ENGINES.values() for p in e.env_prefixes))
