"""A failed server's log read back: the root cause a traceback names (``root_cause``), that
traceback distilled to the engine's own frames and its whole message (``distill``), a reason
cut to its gist (``gist``), and a failed start's excerpt (``excerpt_of_failure``)."""

from __future__ import annotations

import re

from reportgen.engines import Engine

_EXCEPTION = re.compile(
    r"^(?:\([^)]*\)|\[[^\]]*\]|ERROR|CRITICAL|[\d:.\-/]+|\s)*"
    r"((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)): (\S.*)$"
)
# Messages that only point elsewhere ("See root cause above"): the cause is another line.
_WRAPPERS = re.compile(r"root cause above|initialization failed|see the log|EngineDeadError")


# A pydantic validation error's first line names only the model ("1 validation error for
# ParallelConfig"); what was wrong is on the indented lines after it.
_VALIDATION = re.compile(r"^\d+ validation errors? for \w+$")
# A logger's prefix ("(APIServer pid=1723) "), each part with the one space after it: the
# indentation after it is the message's own.
_PREFIX = re.compile(r"^(?:(?:\([^)]*\)|\[[^\]]*\]|ERROR|CRITICAL|[\d:.\-/]+) )*")


def _validation_detail(after: list[str]) -> str | None:
    """What a pydantic validation error says was wrong (its first error: the field, where it
    names one, and the message), from the lines after its first, the logger's prefix cut."""
    field = None
    for raw in after[:6]:
        line = _PREFIX.sub("", raw.rstrip("\n"))
        if not line.strip() or line.lstrip().startswith("For further information"):
            continue
        if not line.startswith((" ", "\t")):
            field = line.strip()
            continue
        said = line.strip().removeprefix("Value error, ").split(" [type=")[0]
        return f"{field}: {said}" if field else said
    return None


def root_cause(text: str) -> tuple[str, int] | None:
    """The first exception line of a server's log that names a cause (not one that only
    points at another), trimmed of the logger's prefix, and the character offset of its line;
    None when there is none. A pydantic validation error gets what it found wrong added
    (vLLM 0.26: "... 1 validation error for ParallelConfig: World size (2) is larger than the
    number of available GPUs (1) in this node. ...")."""
    offset = 0
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        m = _EXCEPTION.search(line.rstrip("\n"))
        if m and not _WRAPPERS.search(line):
            message = m.group(2).strip()
            if _VALIDATION.match(message):
                detail = _validation_detail(lines[i + 1 :])
                message += f": {detail}" if detail else ""
            return f"{m.group(1)}: {message}", offset
        offset += len(line)
    return None


# Frames of call plumbing: torch's module calls and context decorators, the compiler's
# wrappers, the web stack, asyncio and threads. They say how a call got there, not where the
# engine failed.
_PLUMBING = re.compile(
    r"/torch/nn/modules/module\.py|/torch/utils/_contextlib\.py|/torch/_dynamo/"
    r"|/torch/_compile\.py|/torch/autograd/grad_mode\.py|/starlette/|/fastapi/|/uvicorn/"
    r"|/anyio/|/asyncio/|/concurrent/futures/|/threading\.py|/contextlib\.py|/functools\.py"
    r"|transformers/modeling_layers\.py|transformers/utils/generic\.py"
    r"|transformers/utils/output_capturing\.py"
)
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
# a line that starts a new log record: where an exception's message ends
_RECORD = re.compile(
    r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\b|^\[|^\d{4}-\d\d-\d\d|^\(\w+ pid=\d+\)|^\s*$"
)
# vLLM's engine core writes every traceback line behind its own logger prefix:
# "(EngineCore pid=5165) ERROR 12-01 12:40:11 [core.py:1330] "
_LINE_PREFIX = re.compile(
    r"^\(\w+ pid=\d+\) (?:ERROR|WARNING|INFO|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d "
    r"\[[^\]]*\] ?"
)


def _short_path(path: str) -> str:
    """A frame's file from its package on (``.../site-packages/vllm/x.py`` -> ``vllm/x.py``),
    else its last four parts."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return "/".join(path.split("/")[-4:])


def distill(text: str, start: int = 0, frames: int = 8) -> str | None:
    """The first traceback of ``text`` at or after character ``start``, distilled: its frames
    outside call plumbing (``_PLUMBING``; the last ``frames`` of them, the failing end), one
    line each with its code, and the exception's message whole (every line of it, not cut).
    None when no traceback follows ``start`` within a few lines."""
    lines = [_LINE_PREFIX.sub("", ln) for ln in text[start:].splitlines()]
    head = next((i for i, ln in enumerate(lines[:8]) if "Traceback (most recent" in ln), None)
    if head is None:
        return None
    kept: list[str] = []
    plumbing = 0
    i = head + 1
    while i < len(lines):
        m = _FRAME.match(lines[i])
        if m is None:
            if lines[i].startswith("    ") or set(lines[i].strip()) <= set("^~ "):
                i += 1  # a frame's code or its caret line
                continue
            break
        path, number, func = m.groups()
        code = lines[i + 1].strip() if i + 1 < len(lines) and not _FRAME.match(lines[i + 1]) else ""
        if _PLUMBING.search(path):
            plumbing += 1
        else:
            kept.append(
                f"  {_short_path(path)}:{number} in {func}" + (f"\n      {code}" if code else "")
            )
        i += 1
    message: list[str] = []
    while i < len(lines) and not (message and _RECORD.match(lines[i])):
        if lines[i].startswith(("During handling", "The above exception")):
            break
        message.append(lines[i].rstrip())
        i += 1
    shown = kept[-frames:]
    left = len(kept) - len(shown)
    out = ["Traceback (most recent call last): the engine's frames, innermost last"]
    if left:
        out.append(f"  [{left} outer frames of the engine left out]")
    out += shown
    if plumbing:
        out.append(f"  [{plumbing} frames of call plumbing (torch modules, web server) left out]")
    out += [m for m in message if m]
    return "\n".join(out)


DISTILLED_HEADING = "The server's first error, its traceback distilled"
# a Python logger's prefix: "2026-11-30 06:02:07,091 - ContinuousBatchingLogger - ERROR - "
_LOGGER_PREFIX = re.compile(r"\d{4}-\d\d-\d\d[ T][\d:,.]+ - \S+ - [A-Z]+ - ")


def gist(reason: str, most: int = 160) -> str:
    """A failure's reason in one short line: its first line without a logger's prefix, cut
    after the sentence that passes ``most // 2`` characters (or at ``most``), marked "…"
    where cut. The whole message stays in the results and the decision log."""
    first = reason.strip().splitlines()[0] if reason.strip() else ""
    first = _LOGGER_PREFIX.sub("", first)
    if len(first) <= most:
        return first
    end = first.find(". ", most // 2)
    if 0 < end < most:
        return first[:end] + "…"
    space = first.rfind(" ", most // 2, most)
    return first[: space if space > 0 else most].rstrip(",;:") + "…"


def excerpt_of_failure(engine: Engine, text: str) -> tuple[str, str] | None:
    """A failed server's log distilled: (its first fatal line or error and that traceback's
    engine frames and whole message, the line itself), or None without a traceback. The
    engine's fatal line comes first (a server that lives on but cannot generate), else the
    first exception that names a cause."""
    fatal = engine.fatal_in(text)
    if fatal is not None:
        start = text.find(fatal)
        distilled = distill(text, start)
        if distilled is not None:
            return fatal.strip() + "\n" + distilled, fatal.strip()
    cause = root_cause(text)
    if cause is not None:
        begin = traceback_before(text, cause[1])
        distilled = distill(text, begin) if begin is not None else None
        if distilled is not None:
            return distilled, cause[0]
    return None


def traceback_before(text: str, offset: int, within: int = 400) -> int | None:
    """Where the traceback that ends in the line at ``offset`` begins (its "Traceback (most
    recent call last):" line, at most ``within`` lines before), or None."""
    start = text.rfind("\n", 0, max(0, offset - 1)) + 1
    for _ in range(within):
        line_start = text.rfind("\n", 0, max(0, start - 1)) + 1
        line = _LINE_PREFIX.sub("", text[line_start:start])
        if "Traceback (most recent" in line:
            return line_start
        if line_start == 0:
            return None
        start = line_start
    return None
