"""The argparse types of ``reportgen``'s flags: each reads a flag's text into its value, or
refuses it saying how to write one."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable


def _count(text: str) -> int:
    """'0' -> 0: a whole number of 0 or more."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number of 0 or more")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {text}")
    return value


def _ratio(text: str) -> float:
    """'0.5' -> 0.5: a share from 0 up to, not including, 1."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a number from 0 up to 1 (not 1), e.g. 0.5")
    return value


def _above_zero(what: str, example: str) -> Callable[[str], float]:
    """An argparse type: a finite number above 0 ('0.5' -> 0.5), refused as "WHAT above 0"."""

    def read(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not 0 < value < math.inf:
            raise argparse.ArgumentTypeError(f"{text!r}: {what} above 0, e.g. {example}")
        return value

    return read


_positive_float = _above_zero("a number", "0.5")
_seconds = _above_zero("seconds", "30")


def _zero_or_more(what: str, example: str) -> Callable[[str], float]:
    """An argparse type: a finite number of 0 or more ('0' -> 0.0), refused as "WHAT, 0 or
    more"."""

    def read(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not 0 <= value < math.inf:
            raise argparse.ArgumentTypeError(f"{text!r}: {what}, 0 or more, e.g. {example}")
        return value

    return read


_seconds_or_none = _zero_or_more("seconds", "30 (0: none)")
_rps = _zero_or_more("a finite rate in requests a second", "2")  # a ramp's request rate


def _steps(text: str) -> int:
    """A ramp's count of rate levels: 2 or more."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: a count of rate levels, 2 or more, e.g. 5")
    return value


def _json_object(text: str) -> dict[str, object]:
    """'{"top_p": 0.9}' -> {"top_p": 0.9}: a JSON object."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{text!r}: a JSON object, e.g. '{{\"top_p\": 0.9}}'")
    return value


SLO_KEYS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2el": "e2e_ms"}  # vLLM's --goodput names


def _slo(text: str) -> tuple[str, float]:
    """'ttft:500' -> ("ttft_ms", 500.0): vLLM's --goodput KEY:VALUE, in milliseconds."""
    key, _, ms = text.partition(":")
    name = SLO_KEYS.get(key.strip().lower().removesuffix("_ms"))
    try:
        value = float(ms)
    except ValueError:
        value = math.nan
    if name is None or not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(
            f"{text!r}: KEY:MILLISECONDS with KEY one of ttft, tpot, e2el, e.g. ttft:500"
        )
    return name, value


def _header(text: str) -> tuple[str, str]:
    """'X-Route=pool-a' (or 'X-Route: pool-a') -> ("X-Route", "pool-a")."""
    sep = "=" if "=" in text and (":" not in text or text.index("=") < text.index(":")) else ":"
    name, found, value = text.partition(sep)
    if not found or not name.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: NAME=VALUE, e.g. X-Route=pool-a")
    return name.strip(), value.strip()


def _percentiles(text: str) -> tuple[float, ...]:
    """'25,50,99.9' -> (25.0, 50.0, 99.9): percentiles above 0, at most 100, each once."""
    try:
        got = tuple(float(t) for t in text.split(","))
    except ValueError:
        got = ()
    if not got or any(not 0 < p <= 100 for p in got) or len(set(got)) != len(got):
        raise argparse.ArgumentTypeError(
            f"{text!r}: comma-separated percentiles above 0 and at most 100, e.g. 25,50,99.9"
        )
    return got


def _margin(text: str) -> float:
    """'3%' or '0.03' -> 0.03: a share above 0 and below 1 (a bare 3 is refused: 3% or 300%?)."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        value = -1.0
    if not raw.endswith("%") and value >= 1:
        raise argparse.ArgumentTypeError(f"{text!r}: {raw}% or {value:.0%}? write {raw}%")
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a share such as 3% or 0.03")
    return value


def _levels(text: str) -> list[int]:
    """'1,4,16' -> [1, 4, 16]: whole numbers of 1 or more, each once."""
    try:
        levels = [_positive_int(t) for t in text.split(",")]  # "1,,2": refused, not [1, 2]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: comma-separated whole numbers, e.g. 1,4,16"
        ) from None
    if not levels or len(set(levels)) != len(levels):
        raise argparse.ArgumentTypeError(f"{text!r}: give each level once, e.g. 1,4,16")
    return levels


def _rates(text: str) -> list[float]:
    """'1,2,inf' -> [1.0, 2.0, inf]: request rates above 0, each once ("1,,2" and a number
    too large to hold, 1e400, refused rather than read as [1, 2] or inf)."""
    rates = []
    for item in text.split(","):
        word = item.strip().lower()
        try:
            rate = float(word)
        except ValueError:
            rate = math.nan
        if math.isinf(rate) and word.lstrip("+") not in ("inf", "infinity"):
            raise argparse.ArgumentTypeError(
                f"{text!r}: {item.strip()} is too large to hold; write inf for every request at "
                "once"
            )
        rates.append(rate)
    if any(not r > 0 for r in rates) or len(set(rates)) != len(rates):
        raise argparse.ArgumentTypeError(
            f"{text!r}: comma-separated requests per second above 0, each once, e.g. 1,2,4,inf"
        )
    return rates


# shtab's markers for file and folder arguments (what its completion offers for them)
FILE = {"bash": "_shtab_compgen_files", "zsh": "_files"}
DIRECTORY = {"bash": "_shtab_compgen_dirs", "zsh": "_files -/"}


class _Formatter(argparse.RawDescriptionHelpFormatter):
    pass
