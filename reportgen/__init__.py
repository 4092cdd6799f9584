"""reportgen: reproducible LLM-serving tuning campaigns and their engineering reports."""

from importlib.metadata import PackageNotFoundError, version


def _source_version() -> str:
    """The version in the source tree's pyproject.toml (run from a checkout, not installed,
    as on a GPU host where only the source was copied)."""
    import tomllib
    from pathlib import Path

    try:
        with (Path(__file__).resolve().parent.parent / "pyproject.toml").open("rb") as fh:
            return f"{tomllib.load(fh)['project']['version']}+source"
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "0.0.0+unknown"


try:
    __version__ = version("reportgen")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = _source_version()

__all__ = ["__version__"]
