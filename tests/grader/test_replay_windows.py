"""Which optimizer steps the replay samples (issue 29): the first two, powers of two, a later
step of every new pass over a data loader, within a count and a disk budget."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from grader.harness import replay, replay_done_name, replay_judge, replay_name
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


def ranks_loaded(t: Tracer, step: int, monkeypatch: pytest.MonkeyPatch) -> set[int]:
    """The ranks whose data rank 0's replay loads for `step`, its deadline an hour away: a wait
    for a rank that never comes raises TimeoutError after a few polls (no slow test)."""
    polls: list[float] = []

    def sleep(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) > 20:
            raise TimeoutError("still waiting")

    monkeypatch.setattr(replay_judge.time, "sleep", sleep)
    replay.shared(t)["main"] = None
    return set(replay_judge._load_ranks(t, step, time.monotonic() + 3600))


def test_the_replay_does_not_wait_for_a_rank_that_ended_without_the_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside `Join` a rank that ran out of batches takes fewer steps: once it has ended (its
    marker, written after its last save), rank 0 stops waiting for its data of a later step."""
    t = tracer(tmp_path)
    torch.save({"rank": 0}, tmp_path / replay_name(0, 8))
    (tmp_path / replay_done_name(0, 0)).touch()
    (tmp_path / replay_done_name(1, 0)).touch()  # rank 1 ended after 6 steps: no step 8
    assert ranks_loaded(t, 8, monkeypatch) == {0}


def test_the_replay_waits_for_a_rank_still_running_in_this_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rank 1's marker from before a restart says nothing of its run after it."""
    t = tracer(tmp_path)
    t.attempt = 1
    torch.save({"rank": 0}, tmp_path / replay_name(0, 8))
    (tmp_path / replay_done_name(0, 1)).touch()
    (tmp_path / replay_done_name(1, 0)).touch()
    with pytest.raises(TimeoutError):
        ranks_loaded(t, 8, monkeypatch)
    torch.save({"rank": 1}, tmp_path / replay_name(1, 8))  # it got there
    assert ranks_loaded(t, 8, monkeypatch) == {0, 1}
