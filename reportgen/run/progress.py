"""What the terminal shows while a campaign runs. The runner talks to a ``Progress``; the CLI
picks the rich implementation for a terminal and the quiet one for tests and pipes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text


class ProgressSink(Protocol):
    def campaign_start(
        self, total_requests: int, experiments: int, run_dir: Path | None = None
    ) -> None: ...
    def experiment_start(self, index: int, count: int, exp_id: str) -> None: ...
    def phase(self, text: str) -> None: ...
    def warn(self, text: str) -> None: ...
    def level_start(
        self, label: str, repetition: int, repetitions: int, requests: int | None
    ) -> None: ...
    def request_done(self, output_tokens: int, ok: bool) -> None: ...
    def experiment_end(self, exp_id: str, status: str, note: str, skipped: int) -> None: ...
    def close(self) -> None: ...


class Quiet:
    """Prints one line per experiment (for logs, CI and tests)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console

    def _say(self, text: str) -> None:
        if self.console is not None:
            self.console.print(text, highlight=False)

    def campaign_start(
        self, total_requests: int, experiments: int, run_dir: Path | None = None
    ) -> None:
        if run_dir is not None:  # said once it exists: a refused campaign creates none
            self._say(f"run directory: {run_dir}")

    def experiment_start(self, index: int, count: int, exp_id: str) -> None:
        self._say(f"[{index + 1}/{count}] {exp_id}")

    def phase(self, text: str) -> None:
        pass

    def warn(self, text: str) -> None:
        self._say(f"warning: {text}")

    def level_start(
        self, label: str, repetition: int, repetitions: int, requests: int | None
    ) -> None:
        pass

    def request_done(self, output_tokens: int, ok: bool) -> None:
        pass

    def experiment_end(self, exp_id: str, status: str, note: str, skipped: int) -> None:
        self._say(f"    {exp_id}: {status}" + (f" - {note}" if note else ""))

    def close(self) -> None:
        pass


STALL_S = 10.0  # a level with requests out and none finished for this long says so


class _Stall(ProgressColumn):
    """On the level's bar, while requests are out and none has finished for ``STALL_S``:
    how long (a stalled stream otherwise looks like a frozen bar until its timeout)."""

    def __init__(self, live: Live) -> None:
        super().__init__()
        self.live = live

    def render(self, task: Task) -> Text:
        quiet = self.live.quiet_s()
        if task.id != self.live.level or quiet is None or quiet < STALL_S:
            return Text("")
        return Text(f"no request finished for {quiet:.0f} s", style="yellow")


class Live:
    """Rich progress: the campaign bar with time left, and the current level's live tok/s."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("elapsed,"),
            TimeRemainingColumn(),
            TextColumn("left"),
            _Stall(self),
            console=console,
            transient=False,
        )
        self.campaign: TaskID | None = None
        self.level: TaskID | None = None
        self.exp = ""
        self._level_t0 = 0.0
        self._level_tokens = 0
        self._errors = 0
        self._last_done: float | None = None  # a level's start or its last request's end
        self.progress.start()

    def quiet_s(self, now: float | None = None) -> float | None:
        """Seconds since the running level started or last finished a request; None outside
        a level."""
        if self._last_done is None:
            return None
        return (time.monotonic() if now is None else now) - self._last_done

    def campaign_start(
        self, total_requests: int, experiments: int, run_dir: Path | None = None
    ) -> None:
        if run_dir is not None:
            self.console.print(f"run directory: {run_dir}", markup=False, highlight=False)
        self.campaign = self.progress.add_task(
            f"campaign ({experiments} experiments)", total=total_requests or None, rate=""
        )

    def experiment_start(self, index: int, count: int, exp_id: str) -> None:
        self.exp = f"[{index + 1}/{count}] {exp_id}"
        if self.level is not None:
            self.progress.remove_task(self.level)
            self.level = None
        self.console.print(f"[bold]{self.exp}[/bold]")

    def phase(self, text: str) -> None:
        self._last_done = None  # not measuring: a warm-up or a server start is not a stall
        if self.level is not None:
            self.progress.update(self.level, description=f"  {text}")
        else:
            self.level = self.progress.add_task(f"  {text}", total=None, rate="")

    def warn(self, text: str) -> None:
        self.console.print(Text.assemble(("warning: ", "yellow"), text), highlight=False)

    def level_start(
        self, label: str, repetition: int, repetitions: int, requests: int | None
    ) -> None:
        desc = f"  {label} rep {repetition + 1}/{repetitions}"
        self._level_t0, self._level_tokens, self._errors = time.monotonic(), 0, 0
        self._last_done = self._level_t0
        if self.level is not None:
            self.progress.remove_task(self.level)
        self.level = self.progress.add_task(desc, total=requests, rate="")

    def request_done(self, output_tokens: int, ok: bool) -> None:
        if self._last_done is not None:
            self._last_done = time.monotonic()
        self._level_tokens += output_tokens
        self._errors += 0 if ok else 1
        elapsed = max(time.monotonic() - self._level_t0, 1e-6)
        rate = f"{self._level_tokens / elapsed:,.0f} tok/s"
        if self._errors:
            rate += f" [red]{self._errors} err[/red]"
        if self.level is not None:
            self.progress.update(self.level, advance=1, rate=rate)
        if self.campaign is not None:
            self.progress.update(self.campaign, advance=1)

    def experiment_end(self, exp_id: str, status: str, note: str, skipped: int) -> None:
        self._last_done = None
        # Requests a failed experiment never sent still count as done for the time left.
        if self.campaign is not None and skipped:
            self.progress.update(self.campaign, advance=skipped)
        colour = {"ok": "green", "failed": "red"}.get(status, "yellow")
        self.console.print(f"    [{colour}]{status}[/{colour}] {note}", highlight=False)

    def close(self) -> None:
        if self.level is not None:
            self.progress.remove_task(self.level)
            self.level = None
        self.progress.stop()


def make(console: Console, live: bool) -> Any:
    return Live(console) if live else Quiet(console)
