"""Ctrl-C, SIGTERM and SIGHUP during a run: raised as KeyboardInterrupt, and remembered.

Python runs a signal's handler in the main thread at the next bytecode it executes, and that
can be inside a finaliser (an object's ``__del__``, a weakref callback: a closed event loop, a
transport, a subprocess being collected at the end of a level). An exception raised there is
printed as "Exception ignored in ..." and dropped (reportgen's hook keeps it off stderr once a
signal came), and the run would go on as if the signal had never come. So the handler also
records the signal, and the runner calls :func:`check` at each step's boundary (after a level,
after an experiment, before the run is called complete): a signal whose KeyboardInterrupt was
dropped is raised again there.

A signal raises at once, except while reportgen stops its servers and saves what finished
after the first (:func:`stopping`): one then is noted, not raised (it would leave a server
running or results unsaved), and said on stderr. Once the report is being rendered
(:func:`rendering`), another stops the rendering, and one that came in between stops it at
once, so a second Ctrl-C always ends with the command that renders the report.

SIGHUP (the terminal closed) stops the run as the others do; what would have been printed
goes to /dev/null from then on, since a terminal that is gone fails every write (EIO), and a
failed write must not lose the results or the partial report.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

_received: str | None = None  # the name of the signal that asked us to stop, once one did
_again = 0  # signals after the first
_raise_again = False  # rendering: a signal after the first stops it
_stopping = False  # servers being stopped, results saved, after the first signal


def install() -> None:
    """Handle SIGINT, SIGTERM and SIGHUP in this process (the main thread) from now on."""
    global _received, _again, _raise_again, _stopping
    _received, _again, _raise_again, _stopping = None, 0, False, False
    signal.signal(signal.SIGINT, _handler)
    signal.signal(signal.SIGTERM, _handler)
    signal.signal(signal.SIGHUP, _handler)
    sys.unraisablehook = _unraisable


def _unraisable(unraisable: sys.UnraisableHookArgs) -> None:
    """Once a stop signal came, a finaliser it interrupted (or left half-made: an event loop
    whose constructor the signal cut short fails in its ``__del__``) is not printed as
    "Exception ignored in ...": the stop is said, and ``check`` raises it again. Before one,
    Python's own hook prints it."""
    if _received is None:
        sys.__unraisablehook__(unraisable)


def _handler(signum: int, frame: FrameType | None) -> None:
    global _received, _again
    if signum == signal.SIGHUP:  # the terminal is gone: its writes would fail from now on
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 1)
        os.dup2(quiet, 2)
        os.close(quiet)
    if _received is None:
        _received = signal.Signals(signum).name
        raise KeyboardInterrupt
    _again += 1
    if _raise_again or not _stopping:  # (the first one's exception may have been dropped)
        raise KeyboardInterrupt
    os.write(2, b"reportgen: stopping the servers and saving what finished; the report follows\n")


def stopping() -> None:
    """After a stop signal, the servers are being stopped and the results saved: another
    signal waits until that is done (``rendering``). No effect before a signal came."""
    global _stopping
    if _received is not None:
        _stopping = True


def rendering() -> None:
    """The report is rendered from here on: a signal after the first stops it (one that came
    while the servers were stopped and the results saved, at once)."""
    global _raise_again
    _raise_again = True
    if _again:
        raise KeyboardInterrupt


def check() -> None:
    """Raise KeyboardInterrupt if a stop signal came, even if its exception was dropped."""
    if _received is not None:
        raise KeyboardInterrupt


def exit_code() -> int:
    """What a shell expects of a process stopped by a signal: 128 + its number (130 for
    SIGINT, 143 for SIGTERM, 129 for SIGHUP); 130 when none was recorded (a KeyboardInterrupt
    of its own)."""
    if _received is None:
        return 128 + signal.SIGINT
    return 128 + signal.Signals[_received].value


def pending() -> bool:
    """Whether a stop signal came (a running level asks, so that it ends at once even where
    the signal's exception was dropped)."""
    return _received is not None


def received() -> str:
    """How the stop came, in words: "Ctrl-C", "SIGTERM" (or "Ctrl-C or SIGTERM" unknown)."""
    return {"SIGINT": "Ctrl-C", None: "Ctrl-C or SIGTERM"}.get(_received, _received or "")
