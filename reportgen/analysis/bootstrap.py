"""The two-level bootstrap of a tail percentile's ratio (``ratio``), drawn in bulk.

Each of the interval's resamples (2,000) picks a side's runs at random, then requests within
each picked run, from ``np.random.default_rng(seed)``, and takes the pooled requests'
percentile; the interval is the 2.5th and 97.5th percentiles of the resampled ratios. The
draws are those of a plain loop (``looped``: one ``Generator.integers`` call per side's runs
and one per picked run, child before parent, resample after resample), because ``reportgen
verify`` recomputes saved verdicts to 1e-9 and runs decided before must still match.

The loop spends its time in numpy's per-call overhead, not in drawing. The same numbers come
in bulk from how ``integers(0, n)`` draws for a bound n below 2^32 (numpy's ``Generator``
since 1.17): it reads one 32-bit word per number from PCG64, the low then the high half of
each 64-bit output in order (the half left over is kept for the next call), and maps a word w
by Lemire's method: m = w x n, the number is m >> 32, and the word is rejected (the next one
read instead) when m's low 32 bits fall below 2^32 mod n. A bound of 1 reads no word. So the
words are read at once (``bit_generator.random_raw``), the runs each resample picks are
walked in a loop (a few words each), and every picked run's request numbers, their values,
the sorts and the percentiles are computed as arrays. A rejected word, rare (fewer than n in
2^32 words), moves every later word along: the walk goes again from that resample without it.

At first use in a process the bulk draw is compared with the loop on a small case; if they
differ (a numpy that draws otherwise), the loop is used.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["percentile", "ratio"]

LOW = np.uint64(0xFFFFFFFF)
TWO32 = np.uint64(1 << 32)
CHUNK_VALUES = 1 << 20  # request values a side holds at once (resamples are done in chunks)
# More rejected words than this expected over the whole interval: the loop, which takes each
# in its stride, is quicker than walking again for each (runs of thousands of requests).
MAX_REJECTIONS = 4.0
UNEVEN_LONGEST = 200  # requests in a run, where runs differ in length (see ``_bulk_pays``)


def percentile(values: np.ndarray, q: float) -> float:
    """``np.percentile(values, q)`` (its default, linear method) to the last bit, without its
    per-call overhead: the sorted values' two neighbours of the index (n - 1) x q / 100,
    interpolated as numpy does."""
    a = np.sort(values)  # NaN sorts last
    n = a.size
    last = float(a[n - 1])
    if math.isnan(last):
        return last
    v = (n - 1) * (q / 100)
    if v >= n - 1:
        return last
    if v < 0:
        return float(a[0])
    lo = math.floor(v)
    below, above = float(a[lo]), float(a[lo + 1])
    gamma = v - lo
    diff = above - below
    return above - diff * (1 - gamma) if gamma >= 0.5 else below + diff * gamma


def ratio(
    parent: list[np.ndarray], child: list[np.ndarray], q: float, resamples: int, seed: int
) -> np.ndarray:
    """The ``resamples`` resampled ratios child / parent of the pooled ``q``th percentile,
    as ``looped`` draws them (in bulk where this numpy allows)."""
    if _bulk_works() and _bulk_pays(parent, child, resamples):
        got = _bulk(parent, child, q, resamples, seed)
        if got is not None:
            return got
    return looped(parent, child, q, resamples, seed)


def looped(
    parent: list[np.ndarray], child: list[np.ndarray], q: float, resamples: int, seed: int
) -> np.ndarray:
    """The resampled ratios, one resample at a time: the definition ``ratio`` reproduces."""
    rng = np.random.default_rng(seed)

    def resample(runs: list[np.ndarray]) -> float:
        picked = rng.integers(0, len(runs), size=len(runs))
        values = [runs[i][rng.integers(0, len(runs[i]), size=len(runs[i]))] for i in picked]
        return percentile(np.concatenate(values), q)

    return np.array([resample(child) / resample(parent) for _ in range(resamples)])


# -- in bulk --------------------------------------------------------------------------------


def _bulk_pays(parent: list[np.ndarray], child: list[np.ndarray], resamples: int) -> bool:
    """Whether the bulk draw is the quicker: not with many rejected words expected, nor with
    runs of uneven length over UNEVEN_LONGEST requests (each resample's pooled requests then
    need a whole sort of a padded table, slower than the loop's sorts: 0.71 against 0.40 s
    for 5 runs of 100-1,000, benchmarks/README.md)."""
    if _rejections(parent, child, resamples) > MAX_REJECTIONS:
        return False
    even = all(len({len(r) for r in runs}) == 1 for runs in (parent, child))
    return even or max(len(r) for runs in (parent, child) for r in runs) <= UNEVEN_LONGEST


def _rejections(parent: list[np.ndarray], child: list[np.ndarray], resamples: int) -> float:
    """Rejected words expected over the interval: a run of n requests is picked about once a
    resample and rejects a word with probability (2^32 mod n) / 2^32."""
    per = sum(len(r) * ((1 << 32) % len(r)) for runs in (parent, child) for r in runs)
    return resamples * per / (1 << 32)


class _Words:
    """The 32-bit words ``integers`` reads from a fresh ``default_rng(seed)``, in order, at
    absolute positions; rejected ones are taken out as found (``drop``), so a position counts
    the words that made numbers. Words before ``base`` are forgotten (``forget``)."""

    def __init__(self, seed: int) -> None:
        self._bits = np.random.default_rng(seed).bit_generator
        self.w = np.empty(0, dtype=np.uint64)
        self.base = 0
        # Pick words the walk took out, (position, word), in order: when a rejected request
        # word is found before one of them, the words after it were read one place off and
        # the pick word must go back (``undo``) before the walk goes again.
        self.picks_dropped: list[tuple[int, np.uint64]] = []

    def upto(self, end: int) -> None:
        """Read words until position ``end`` (excluded) is there (at least doubling)."""
        missing = end - (self.base + self.w.size)
        if missing > 0:
            outputs = max(missing // 2 + 4096, self.w.size // 2)
            raw = self._bits.random_raw(outputs)
            new = np.empty(2 * outputs, dtype=np.uint64)
            new[0::2] = raw & LOW
            new[1::2] = raw >> np.uint64(32)
            self.w = np.concatenate([self.w, new])

    def drop(self, pos: int, pick: bool = False) -> None:
        if pick:
            self.picks_dropped.append((pos, self.w[pos - self.base]))
        self.w = np.delete(self.w, pos - self.base)

    def undo(self, after: int) -> None:
        """Put back the pick words taken out after position ``after``, last first."""
        while self.picks_dropped and self.picks_dropped[-1][0] > after:
            pos, word = self.picks_dropped.pop()
            self.w = np.insert(self.w, pos - self.base, word)

    def forget(self, pos: int) -> None:
        self.w = self.w[pos - self.base :]
        self.base = pos


def _lemire(w: np.ndarray, bound: np.ndarray | np.uint64) -> tuple[np.ndarray, np.ndarray]:
    """Words mapped to numbers below ``bound`` as numpy's ``integers`` maps them, and which
    words it rejects (m's low 32 bits below 2^32 mod bound)."""
    m = w * bound
    return (m >> np.uint64(32)).astype(np.int64), (m & LOW) < (TWO32 % bound)


@dataclass
class _Walk:
    """Resamples walked from a word: where each starts and ends, and for each side (child,
    parent) the runs it picked and the position of each picked run's first word (-1: a run
    of one, which reads none), as (resamples, runs) arrays."""

    start: np.ndarray
    end: np.ndarray
    picks: tuple[np.ndarray, ...]
    starts: tuple[np.ndarray, ...]

    def keep(self, rows: int) -> _Walk:
        return _Walk(
            self.start[:rows],
            self.end[:rows],
            tuple(p[:rows] for p in self.picks),
            tuple(s[:rows] for s in self.starts),
        )


def _walk(words: _Words, lengths: tuple[list[int], ...], pos: int, rows: int) -> _Walk:
    """``rows`` resamples from word ``pos``, one at a time: each side's picks (a rejected
    word taken out as it comes), then its picked runs' words (counted, not read)."""
    most = sum(len(x) + len(x) * max(x) for x in lengths)
    start, end = np.empty(rows, dtype=np.int64), np.empty(rows, dtype=np.int64)
    picks = tuple(np.empty((rows, len(x)), dtype=np.int64) for x in lengths)
    starts = tuple(np.empty((rows, len(x)), dtype=np.int64) for x in lengths)
    for b in range(rows):
        start[b] = pos
        words.upto(pos + most)
        for side, lens in enumerate(lengths):
            runs = len(lens)
            if runs > 1:
                reject = (1 << 32) % runs
                k = 0
                while k < runs:
                    m = int(words.w[pos - words.base]) * runs
                    if (m & 0xFFFFFFFF) < reject:
                        words.drop(pos, pick=True)
                        words.upto(pos + most)
                        continue
                    picks[side][b, k] = m >> 32
                    pos += 1
                    k += 1
            else:
                picks[side][b, 0] = 0
            for k in range(runs):
                n = lens[picks[side][b, k]]
                starts[side][b, k] = pos if n > 1 else -1
                if n > 1:
                    pos += n
        end[b] = pos
    return _Walk(start, end, picks, starts)


def _walk_even(words: _Words, lengths: tuple[list[int], ...], pos: int, rows: int) -> _Walk | None:
    """The same walk at once, where every run of a side has as many requests (each resample
    then reads as many words); None where a pick's word is rejected (``_walk`` takes it)."""
    size = [(len(x) if len(x) > 1 else 0, len(x) * x[0] if x[0] > 1 else 0) for x in lengths]
    per = sum(a + b for a, b in size)
    start = pos + per * np.arange(rows, dtype=np.int64)
    words.upto(int(start[-1]) + per + 1)
    picks, starts = [], []
    at = 0
    for (pick_words, run_words), lens in zip(size, lengths, strict=True):
        runs, n = len(lens), lens[0]
        if pick_words:
            where = start[:, None] + at + np.arange(runs)
            picked, rejected = _lemire(words.w[where - words.base], np.uint64(runs))
            if rejected.any():
                return None
            picks.append(picked)
        else:
            picks.append(np.zeros((rows, 1), dtype=np.int64))
        at += pick_words
        if run_words:
            starts.append(start[:, None] + at + n * np.arange(runs))
        else:
            starts.append(np.full((rows, runs), -1, dtype=np.int64))
        at += run_words
    return _Walk(start, start + per, tuple(picks), tuple(starts))


@dataclass
class _Side:
    """One side's picked runs over a chunk of resamples, as arrays of segments."""

    row: np.ndarray  # the segment's resample (0-based in the chunk)
    run: np.ndarray
    start: np.ndarray  # its first word (-1: none)
    n: np.ndarray  # its requests


def _segments(walk: _Walk, side: int, lens: np.ndarray) -> _Side:
    picks = walk.picks[side]
    rows, runs = picks.shape
    run = picks.ravel()
    return _Side(np.repeat(np.arange(rows), runs), run, walk.starts[side].ravel(), lens[run])


def _draws(words: _Words, seg: _Side) -> tuple[np.ndarray, int | None]:
    """Every segment's request numbers (concatenated), and the position of the first
    rejected word among them (None: none)."""
    n = seg.n
    total = int(n.sum())
    first = np.cumsum(n) - n
    within = np.arange(total, dtype=np.int64) - np.repeat(first, n)
    start = np.repeat(seg.start, n)
    wordy = start >= 0
    pos = np.where(wordy, start + within, words.base)
    words.upto(int(pos.max()) + 1)
    numbers, rejected = _lemire(words.w[pos - words.base], np.repeat(n, n).astype(np.uint64))
    rejected &= wordy
    at = int(pos[rejected].min()) if rejected.any() else None
    return np.where(wordy, numbers, 0), at


def _percentiles(
    seg: _Side, idx: np.ndarray, flat: np.ndarray, offsets: np.ndarray, rows: int, q: float
) -> np.ndarray:
    """Each resample's pooled ``q``th percentile, as ``percentile`` computes it."""
    values = flat[np.repeat(offsets[seg.run], seg.n) + idx]
    counts = np.bincount(seg.row, weights=seg.n, minlength=rows).astype(np.int64)
    width = int(counts.max())
    v = (counts - 1).astype(np.float64) * (q / 100)
    if (counts == width).all():  # every resample as long: only the two neighbours sorted
        row_of = np.repeat(np.arange(rows), width)
        lo0 = math.floor(v[0])
        kth = sorted({lo0, min(lo0 + 1, width - 1), width - 1})
        table = np.partition(values.reshape(rows, width), kth, axis=1)
    else:
        row_of = np.repeat(np.arange(rows), counts)
        col = np.arange(values.size) - np.repeat(np.cumsum(counts) - counts, counts)
        table = np.full((rows, width), np.inf)
        table[row_of, col] = values
        table.sort(axis=1)
    nan = np.bincount(row_of, weights=np.isnan(values), minlength=rows) > 0
    r = np.arange(rows)
    last = table[r, counts - 1]
    lo = np.floor(v).astype(np.int64)
    inside = v < counts - 1
    lo_in = np.where(inside, lo, 0)
    below = table[r, lo_in]
    above = table[r, np.where(inside, lo_in + 1, 0)]
    gamma = v - lo
    with np.errstate(invalid="ignore", over="ignore"):
        diff = above - below
        mixed = np.where(gamma >= 0.5, above - diff * (1 - gamma), below + diff * gamma)
    out = np.where(inside, mixed, last)
    out[nan] = np.nan
    return np.asarray(out, dtype=np.float64)


def _bulk(
    parent: list[np.ndarray], child: list[np.ndarray], q: float, resamples: int, seed: int
) -> np.ndarray | None:
    """``looped``'s ratios, drawn in bulk; None where the loop must say it (a parent's
    percentile of zero: the loop's division raises)."""
    sides = (child, parent)
    lengths = tuple([len(r) for r in runs] for runs in sides)
    lens = tuple(np.array(x, dtype=np.int64) for x in lengths)
    flats = tuple(np.concatenate(runs) for runs in sides)
    offsets = tuple(np.cumsum(x) - x for x in lens)
    even = all(len(set(x)) == 1 for x in lengths)
    per_row = max(len(x) * max(x) for x in lengths)  # the most values one resample holds
    chunk = max(1, CHUNK_VALUES // per_row)
    words = _Words(seed)
    pos = 0
    out = []
    done = 0
    while done < resamples:
        rows = min(chunk, resamples - done)
        walk = (_walk_even(words, lengths, pos, rows) if even else None) or _walk(
            words, lengths, pos, rows
        )
        while True:  # again from a resample whose words held a rejected one
            segs = [_segments(walk, s, lens[s]) for s in (0, 1)]
            drawn = [_draws(words, seg) for seg in segs]
            bad = [at for _, at in drawn if at is not None]
            if not bad:
                break
            at = min(bad)
            words.undo(after=at)  # the words after it were read one place off
            words.drop(at)
            kept = int(np.searchsorted(walk.end, at, side="right"))
            rest = _walk(words, lengths, int(walk.end[kept - 1]) if kept else pos, rows - kept)
            walk = _join(walk.keep(kept), rest)
        pooled = [_percentiles(segs[s], drawn[s][0], flats[s], offsets[s], rows, q) for s in (0, 1)]
        if (pooled[1] == 0).any():
            return None
        out.append(pooled[0] / pooled[1])
        pos = int(walk.end[-1])
        words.forget(pos)
        words.picks_dropped.clear()
        done += rows
    return np.concatenate(out)


def _join(a: _Walk, b: _Walk) -> _Walk:
    return _Walk(
        np.concatenate([a.start, b.start]),
        np.concatenate([a.end, b.end]),
        tuple(np.concatenate(x) for x in zip(a.picks, b.picks, strict=True)),
        tuple(np.concatenate(x) for x in zip(a.starts, b.starts, strict=True)),
    )


@functools.cache
def _bulk_works() -> bool:
    """Whether the bulk draw gives the loop's numbers here (checked once per process on runs
    of one, two and odd lengths, ties and a NaN)."""
    gen = np.random.default_rng(12345)
    parent = [gen.lognormal(0, 0.5, 7), np.array([3.0]), gen.lognormal(0, 0.5, 2)]
    child = [np.array([1.0, 1.0, 2.0, np.nan]), gen.lognormal(0, 0.5, 33)]
    for p, c, q, seed in ((parent, child, 99, 3), (child, parent, 50, 4)):
        bulk = _bulk(p, c, q, 60, seed)
        if bulk is None or not np.array_equal(bulk, looped(p, c, q, 60, seed), equal_nan=True):
            return False
    return True
