"""The load generator's event loop (``client.event_loop``)."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from reportgen.load import client


def _task_left_with(kind: type[BaseException]) -> None:
    """A task of a load generator's loop that ended on an exception of ``kind``, which
    nobody retrieved; the loop closed."""

    async def fails() -> None:
        raise kind("a fault in a task")

    loop = client.event_loop()
    task = loop.create_task(fails())
    if kind is KeyboardInterrupt:
        with pytest.raises(KeyboardInterrupt):  # it ends the loop's run as it ends the task
            loop.run_until_complete(task)
    else:
        loop.run_until_complete(asyncio.wait([task]))
    loop.close()


def _collected() -> None:
    gc.collect()  # (the task, its exception and its frames hold each other)


def test_a_ctrl_c_that_reached_a_task_prints_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A second Ctrl-C while the first one's cancellation runs the load's tasks ends one of
    them on KeyboardInterrupt: the run stops on it with its own message, and asyncio's "Task
    exception was never retrieved" with its traceback is not printed beside it. Any other
    exception a task was left with is still said."""
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        _task_left_with(KeyboardInterrupt)
        _collected()
        assert not caplog.records
        _task_left_with(ValueError)
        _collected()
    (said,) = caplog.records
    assert "Task exception was never retrieved" in said.getMessage()
    assert said.exc_info is not None and isinstance(said.exc_info[1], ValueError)
