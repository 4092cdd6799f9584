"""reportgen: reproducible LLM-serving tuning campaigns and their engineering reports."""

from functools import cache
from typing import Any


@cache
def _version() -> str:
    """The installed distribution's version; from a source tree that was never installed (as
    on a GPU host where only the source was copied), pyproject.toml's with "+source"."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("reportgen")
    except PackageNotFoundError:
        return _source_version()


def _source_version() -> str:
    import tomllib
    from pathlib import Path

    try:
        with (Path(__file__).resolve().parent.parent / "pyproject.toml").open("rb") as fh:
            return f"{tomllib.load(fh)['project']['version']}+source"
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "0.0.0+unknown"


def __getattr__(name: str) -> Any:
    # read when first asked for, not at import: importlib.metadata costs every process that
    # imports the package (the simulator, the reaper, the far side of SSH) about 40 ms
    if name == "__version__":
        return _version()
    raise AttributeError(f"module 'reportgen' has no attribute {name!r}")


__all__ = ["__version__"]
