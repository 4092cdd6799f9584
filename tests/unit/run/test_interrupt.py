"""After a stop signal, a finaliser it interrupted is not printed as a traceback: a SIGTERM that
cut an event loop's constructor short once left "Exception ignored in BaseEventLoop.__del__"
and its traceback on stderr, where the run had said it stopped."""

from __future__ import annotations

import sys

import pytest

from reportgen.run import interrupt


def _unraisable_from_a_finaliser() -> None:
    class HalfMade:
        def __del__(self) -> None:
            raise AttributeError(
                "'_UnixSelectorEventLoop' object has no attribute '_signal_handlers'"
            )

    HalfMade()  # collected at once: its __del__ raises, which Python hands to the hook


def test_a_finaliser_failing_after_a_stop_signal_prints_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "unraisablehook", interrupt._unraisable)
    monkeypatch.setattr(interrupt, "_received", None)
    _unraisable_from_a_finaliser()
    assert "_signal_handlers" in capsys.readouterr().err  # before a signal: Python's own hook
    monkeypatch.setattr(interrupt, "_received", "SIGTERM")
    _unraisable_from_a_finaliser()
    assert capsys.readouterr().err == ""
