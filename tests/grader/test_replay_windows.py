"""Which optimizer steps the replay samples (issue 29): the first two, powers of two, a later
step of every new pass over a data loader, within a count and a disk budget."""

from __future__ import annotations

from pathlib import Path

from grader.harness import replay
from grader.harness.tracer import Tracer
from grader.launch.wire import HarnessSettings


def tracer(tmp_path: Path) -> Tracer:
    return Tracer(
        tmp_path,
        rank=0,
        local_rank=0,
        world_size=2,
        attempt=0,
        learner_file="/w/main.py",
        settings=HarnessSettings(),
    )


def test_the_first_two_steps_and_powers_of_two(tmp_path: Path) -> None:
    t = tracer(tmp_path)
    picked = [n for n in range(1, 40) if replay.sampled(t, n)]
    assert picked == [1, 2, 4, 8, 16, 32]  # then the budget of windows is spent


def test_a_later_step_of_every_new_loader_pass(tmp_path: Path) -> None:
    t = tracer(tmp_path)
    picked = []
    step = 0
    for epoch in range(3):  # 5 steps per epoch: an odd length
        for k in range(5):
            step += 1
            t.state["current_iter"] = {"id": epoch, "steps": k}
            if replay.sampled(t, step):
                picked.append(step)
    # 1, 2 and 4 by count; the second step of epochs 2 and 3 (7 and 12); 8 is a power of two.
    assert picked == [1, 2, 4, 7, 8, 12][: replay.MAX_WINDOWS]
    assert any(6 <= n <= 10 for n in picked) and any(11 <= n <= 15 for n in picked)


def test_no_later_window_once_the_saved_data_is_large(tmp_path: Path) -> None:
    t = tracer(tmp_path)
    assert replay.sampled(t, 1)
    replay.shared(t)["bytes"] = replay.MAX_REPLAY_BYTES + 1
    assert not replay.sampled(t, 2)
