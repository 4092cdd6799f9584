"""What the terminal shows while a level runs: a stalled stream is said on the level's bar, not
left looking like a frozen bar until its request timeout."""

from __future__ import annotations

import io

from rich.console import Console

from reportgen.run import progress


def test_a_level_with_nothing_finished_for_long_says_so() -> None:
    out = io.StringIO()
    live = progress.Live(Console(file=out, force_terminal=True, width=200))
    try:
        (stall,) = [c for c in live.progress.columns if isinstance(c, progress._Stall)]
        live.campaign_start(8, 1)
        live.experiment_start(0, 1, "bench")
        live.level_start("C=1", 0, 1, 8)
        assert live.level is not None
        task = live.progress.tasks[-1]
        assert task.id == live.level and stall.render(task).plain == ""
        assert live._last_done is not None
        live._last_done -= progress.STALL_S + 2  # as if the last answer came 12 s ago
        assert stall.render(task).plain == f"no request finished for {progress.STALL_S + 2:.0f} s"
        campaign = live.progress.tasks[0]
        assert stall.render(campaign).plain == ""  # on the level's bar only
        live.request_done(16, True)  # an answer: no longer stalled
        assert stall.render(task).plain == ""
        live._last_done -= progress.STALL_S + 2
        live.phase("warming up")  # between levels nothing is expected to finish
        assert stall.render(live.progress.tasks[-1]).plain == ""
    finally:
        live.close()


def test_the_campaign_bar_counts_only_what_is_still_to_run() -> None:
    """A search read "1024/128" (its probes are decided while running), and a resumed run
    ended at "144/432, 0:00:25 left" (the experiments kept from before were counted)."""
    from reportgen import campaign
    from reportgen.run.plan import plan, planned_requests, total_requests
    from tests.conftest import ROOT

    demo = campaign.load(ROOT / "campaigns" / "demo.toml")
    steps = plan(demo)
    every = total_requests(demo)
    assert every == sum(planned_requests(demo, r) for r in steps) > 0
    kept = {steps[0].id, steps[1].id}
    assert total_requests(demo, kept) == every - sum(planned_requests(demo, r) for r in steps[:2])
    text = (ROOT / "campaigns" / "demo.toml").read_text()
    search = text.replace(
        "requests_per_level = 16\n",
        'requests_per_level = 16\nfind_max = { slo = "ttft_ms.p99<500" }\n',
    )
    assert total_requests(campaign.loads(search, "c.toml")) == 0  # no total: a count alone
