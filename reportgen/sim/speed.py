"""How fast one start of the simulator runs: a factor on every delay it draws at start, so
starts of one configuration differ (``--start-spread``) and a host drifts start by start
(``--drift``, counted in ``--starts-file``), as real GPU hosts do."""

from __future__ import annotations

import argparse
import fcntl
import math
import os
import random


def start_speed(args: argparse.Namespace) -> float:
    """This start's factor on every delay: (1 + --drift) to the power of the starts counted
    before it in --starts-file, times a lognormal draw of mean 1 and relative sd
    --start-spread (seeded by --seed and that count with a file, else by nothing)."""
    count = 0
    path = getattr(args, "starts_file", None)
    if path:
        with open(path, "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            count = len(f.read().split())
            f.write(f"{os.getpid()}\n")
    speed = (1 + float(getattr(args, "drift", 0.0) or 0.0)) ** count
    spread = float(getattr(args, "start_spread", 0.0) or 0.0)
    if spread > 0:
        sigma = math.sqrt(math.log1p(spread**2))
        rng = random.Random(f"{args.seed}:{count}") if path else random.Random()
        speed *= rng.lognormvariate(-(sigma**2) / 2, sigma)
    return speed
