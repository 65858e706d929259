"""hetlb.progress: the log interval over a process's bars, the estimate of time left, waits of
unknown length (working), and place's share done (the work's, not the time budget's)."""

import io
import time
import types

import numpy as np
import pytest

import hetlb.progress
from hetlb.progress import LOG_INTERVAL, ProgressBar, working


class FakeClock:
    def __init__(self, now: float = 100.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_task_of_many_short_steps_logs_a_line_every_interval(monkeypatch, capsys):
    """Ten bars of 2 s each on standard error (the sweeps of a reproduction, piped): none alone
    lasts the interval, together they log a line every LOG_INTERVAL seconds (20 s: four lines)."""
    clock = FakeClock()
    monkeypatch.setattr(hetlb.progress, "time", types.SimpleNamespace(perf_counter=clock))
    monkeypatch.setattr(hetlb.progress, "_last_logged", {})
    for step in range(10):
        bar = ProgressBar(f"stage{step} ")
        for tick in range(1, 5):
            clock.now += 0.5
            bar.update(tick / 4, tick * 1000)
        bar.close()
    lines = capsys.readouterr().err.splitlines()
    # at 5 s (stage 2 of 2 s to 4 s) and 5 s after its closing line, at 11 s and 17 s; each bar that
    # logged closes with a line
    assert [line.split(":")[0] for line in lines] == ["stage2", "stage2", "stage5", "stage5", "stage8", "stage8"]
    assert LOG_INTERVAL == 5.0


def test_the_time_left_leaves_out_the_first_pieces_start_up():
    """A first tenth that took 9 s (a compile) and then 0.3 s a tenth: at 20% the time left is that
    of the remaining 8 tenths at the later rate, 2.4 s; elapsed x (1 - f) / f would say 37 s."""
    clock = FakeClock(0.0)
    bar = ProgressBar("x ", stream=io.StringIO(), clock=clock)
    clock.now = 9.0
    bar.update(0.1, 100)
    assert bar.time_left(9.0, 0.1) == pytest.approx(81.0)  # one point: the elapsed rate
    for tenth in range(2, 10):
        clock.now = 9.0 + 0.3 * (tenth - 1)
        bar.update(tenth / 10, 100 * tenth)
        actual = 0.3 * (10 - tenth)
        assert bar.time_left(clock.now, tenth / 10) == pytest.approx(actual)


def test_a_wait_of_unknown_length_shows_its_time_and_a_short_one_shows_nothing():
    stream = io.StringIO()
    with working("solve ", stream=stream, start_after=0.05) as bar:
        time.sleep(0.3)
        bar.update(0.5, None, detail="half")
        time.sleep(0.05)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("solve: ") and lines[0].endswith(" s") and "\r" not in stream.getvalue()
    assert lines[-1].startswith("solve: 100.0% done, half, ")
    quick = io.StringIO()
    with working("solve ", stream=quick, start_after=5.0):
        pass
    assert quick.getvalue() == ""


def test_places_share_done_is_the_works_whatever_the_time_budget(monkeypatch):
    """The share done that place reports, update by update, is the same under a budget of 2
    minutes and of 10 hours (it was the share of the budget spent: 170 times off when a search
    ended long before its budget); it grows, and ends at 1."""
    from hetlb.experiments import place as place_module

    speeds = np.repeat([1.0, 0.5, 0.25, 0.125], 4)
    rates = np.full(16, 0.7 * speeds.sum() / 16)
    shares = {}
    for budget in (120.0, 36_000.0):
        seen: list = []
        monkeypatch.setattr(ProgressBar, "update", lambda self, fraction, events, seen=seen, **k: seen.append(fraction))
        place_module.place(speeds, rates, tolerance=0.6, families=("fig3",), jobs=2000, replications=2,
                           time_budget=budget, seed=2)  # fmt: skip
        shares[budget] = seen
    assert shares[120.0] == shares[36_000.0]
    assert np.all(np.diff(shares[120.0]) >= 0) and shares[120.0][-1] == 1.0 and 0 < shares[120.0][0] < 0.5


def test_the_slotted_models_progress_steps_change_no_result(monkeypatch):
    """Kernel calls of one slot each (a large system's steps, scaled by the work of a slot) give
    the results of the default steps, bit for bit."""
    import hetlb
    from hetlb.simulation import slotted

    system = hetlb.SlottedSystem.from_speeds([1.0, 1.0, 0.5], dispatchers=2, load=0.6)
    assert slotted.slots_per_call(system) > 1000
    default = hetlb.simulate_slotted(system, "l-jsq", slots=400, seed=5).runs[0]
    monkeypatch.setattr(slotted, "WORK_PER_CALL", 1)
    assert slotted.slots_per_call(system) == 1
    stepped = hetlb.simulate_slotted(system, "l-jsq", slots=400, seed=5).runs[0]
    assert stepped.mean_delay == default.mean_delay and stepped.batch_delay_means == default.batch_delay_means
