"""reportgen: reproducible LLM-serving tuning campaigns and their engineering reports."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("reportgen")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
