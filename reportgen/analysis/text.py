"""Is a model's answer text, or a broken engine's noise? Pure heuristics, each with a reason.

A broken kernel, a wrong quantisation or a bad speculative-decoding setting rarely crashes:
it produces text that is fast to generate and useless. The signs looked for:

- an empty answer;
- unreadable characters: U+FFFD replacement characters or control characters (other than
  newlines and tabs) above 5% of the characters;
- few letters or digits: under 40% of the visible characters, line-drawing ones aside (a
  stream of punctuation);
- one character repeated 20 or more times in a row (``!!!!!!!!``, ``\\n\\n\\n``), except
  characters used to draw lines (``-``, ``=``, ``_``, ``*``, ``#``, ``.``, spaces);
- a loop: the answer ends in a span of 1 to 50 words repeated, that run covering at least
  two periods and 40% of the answer's words (``the cat the cat the cat ...``).

A text of fewer than 8 words is only checked for the first three. The rules are loose on
purpose: a check that cries wolf on a good model gets ignored. Answers of a real model asked
to stop at a length (``ignore_eos``) often loop; these rules are for golden prompts answered
with the model's own end of sequence.
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

MAX_PERIOD = 50
LOOP_SHARE = 0.4
RUN_CHARS = 20
_LINE_DRAWING = set("-=_*#.~ \t")


# An answer repeats itself where its UTF-8 bytes compress (zlib) more than this many times
# over: OpenAI Whisper's test for a looping transcript (transcribe's
# compression_ratio_threshold, 2.4). Answers shorter than REPEAT_MIN_BYTES are not judged:
# too short to compress whatever they say.
REPEAT_RATIO = 2.4
REPEAT_MIN_BYTES = 64
# The share of an experiment's answers that repeat themselves from which its outputs are
# degenerate (a working model asked random prompts repeats itself in a few)
DEGENERATE_SHARE = 0.25
MIN_ANSWERS = 10  # fewer judged answers than this: no judgement of the outputs


def repeats_itself(text: str) -> bool | None:
    """Whether ``text`` is mostly a short string repeated ("queriesqueriesqueries...",
    "iu iu iu ..."), by how much it compresses; None where it is too short to tell."""
    raw = text.encode()
    if len(raw) < REPEAT_MIN_BYTES:
        return None
    return len(raw) / len(zlib.compress(raw)) > REPEAT_RATIO


@dataclass(frozen=True)
class Outputs:
    """What an experiment's answers look like as a whole: how many were long enough to
    judge, how many of those repeat themselves, and how many of all were distinct."""

    answers: int
    judged: int
    repetitive: int
    distinct: int

    @property
    def degenerate(self) -> bool:
        return self.judged >= MIN_ANSWERS and self.repetitive / self.judged >= DEGENERATE_SHARE

    def said(self) -> str:
        if not self.judged:
            return f"{self.answers} answer(s), none long enough to judge"
        return (
            f"{self.repetitive / self.judged:.0%} of {self.judged} answers repeat a short "
            f"string (compress over {REPEAT_RATIO}x); {self.distinct / self.answers:.0%} of "
            f"{self.answers} distinct"
        )


def outputs(texts: Iterable[str]) -> Outputs:
    """``Outputs`` of the answers ``texts``."""
    seen = list(texts)
    said = [repeats_itself(t) for t in seen]
    return Outputs(
        answers=len(seen),
        judged=sum(x is not None for x in said),
        repetitive=sum(x is True for x in said),
        distinct=len(set(seen)),
    )


def problems(text: str) -> list[str]:
    """Why ``text`` looks degenerate (empty when it looks like text)."""
    out: list[str] = []
    stripped = text.strip()
    if not stripped:
        return ["empty answer"]
    bad = sum(
        1
        for ch in text
        if ch == "\ufffd" or (unicodedata.category(ch) == "Cc" and ch not in "\n\t\r")
    )
    if bad / len(text) > 0.05:
        out.append(f"{bad} unreadable characters of {len(text)}")
    visible = [ch for ch in stripped if not ch.isspace() and ch not in _LINE_DRAWING]
    alnum = sum(ch.isalnum() for ch in visible)
    if visible and alnum / len(visible) < 0.4:
        out.append(f"only {alnum} of {len(visible)} visible characters are letters or digits")
    run = _longest_run(text)
    if run is not None:
        out.append(run)
    words = stripped.split()
    if len(words) >= 8:
        loop = _loop(words)
        if loop is not None:
            out.append(loop)
    return out


def _longest_run(text: str) -> str | None:
    for m in re.finditer(rf"(.)\1{{{RUN_CHARS - 1},}}", text, flags=re.DOTALL):
        if m.group(1) not in _LINE_DRAWING:
            return f"{m.group(1)!r} repeated {len(m.group(0))} times in a row"
    return None


def _loop(words: list[str]) -> str | None:
    """The answer's tail repeats a span of ``p`` words: the longest such run, if long."""
    n = len(words)
    best: tuple[int, int] | None = None  # (run of words matching p earlier, period p)
    for p in range(1, min(MAX_PERIOD, n // 3) + 1):
        run = 0
        i = n - 1
        while i - p >= 0 and words[i] == words[i - p]:
            run += 1
            i -= 1
        if run >= 2 * p and run + p >= LOOP_SHARE * n and (best is None or run > best[0]):
            best = (run, p)
    if best is None:
        return None
    run, p = best
    span = " ".join(words[n - p :])
    if len(span) > 60:
        span = span[:57] + "..."
    return f"ends in a loop: {span!r} ({p} word(s)) repeated, {run + p} of {n} words"


def agreement(a: str, b: str) -> float:
    """How far two answers agree, 0 to 1: the share of words up to the first difference,
    of the longer answer. Greedy decoding of the same model agrees fully, or until numerics
    (a different kernel, batch size) tip one token and the texts drift apart."""
    wa, wb = a.split(), b.split()
    if not wa and not wb:
        return 1.0
    same = 0
    for x, y in zip(wa, wb, strict=False):
        if x != y:
            break
        same += 1
    return same / max(len(wa), len(wb))
