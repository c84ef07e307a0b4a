"""The checks as pure functions over synthetic traces (no processes started)."""

from __future__ import annotations

from typing import Any

from grader.checks.base import RankView, RunView, get_check, index_ranges, stack_line

SOURCE = "\n".join(f"line{i}" for i in range(1, 60))


def ev(kind: str, **data: Any) -> dict[str, Any]:
    return {"kind": kind, "t": data.pop("t", 0.0), "sync": data.pop("sync", 0), **data}


def start(rank: int) -> dict[str, Any]:
    return ev("start", pid=100 + rank, file="/work/main.py")


def end(status: str = "ok") -> dict[str, Any]:
    return ev("end", status=status, exit_code=0 if status == "ok" else 1)


def run_of(*ranks: list[dict[str, Any]], exit_codes: list[int] | None = None, **kw: Any) -> RunView:
    codes = exit_codes or [0] * len(ranks)
    views = [RankView(rank=i, exit_code=codes[i], events=events) for i, events in enumerate(ranks)]
    return RunView(world_size=len(ranks), device="cpu", ranks=views, source=SOURCE, **kw)


def judge(check_id: str, run: RunView, params: dict[str, Any] | None = None) -> Any:
    definition = get_check(check_id)
    assert definition is not None
    return definition.fn(run, params or {})


def iteration(indices: list[int], epoch: int, steps: int = 4, **kw: Any) -> dict[str, Any]:
    return ev(
        "iteration",
        indices=indices,
        count=len(indices),
        epoch=epoch,
        steps=steps,
        distributed=kw.pop("distributed", True),
        shuffle=True,
        sampler_id=kw.pop("sampler_id", 1),
        dataset_len=kw.pop("dataset_len", 8),
        batch_size=2,
        line=30,
        **kw,
    )


def test_teardown_abort_after_a_finished_run_is_not_a_failure() -> None:
    run = run_of([start(0), end()], [start(1), end()], exit_codes=[-6, 0])
    out = judge("run.completed", run)
    assert out.status == "pass"
    assert "teardown" in out.message


def test_first_crashing_rank_is_named_with_its_line() -> None:
    crash = ev("exception", t=2.0, type="KeyError", message="'acc'", line=42)
    later = ev("exception", t=3.0, type="RuntimeError", message="Connection closed by peer", line=7)
    run = run_of([start(0), later, end("exception")], [start(1), crash, end("exception")])
    out = judge("run.completed", run)
    assert (out.status, out.rank, out.line) == ("fail", 1, 42)
    assert "Rank 1 failed first, at line 42 (`line42`)" in out.message


def test_hang_names_each_rank_and_line_from_the_stacks() -> None:
    stack0 = 'Current thread 0x1 (most recent call first):\n  File "/work/main.py", line 12 in f\n'
    run = run_of([start(0)], [start(1), end()], timed_out=True, wall_seconds=30)
    run.ranks[0].stack = stack0
    out = judge("run.completed", run)
    assert out.status == "fail" and out.rank == 0 and out.line == 12
    assert "rank 0 was stuck at line 12" in out.message and "rank 1 had finished" in out.message


def test_params_that_drift_apart_fail_with_numbers() -> None:
    same = ev("step", opt=0, n=1, digest="aa", sums=[1.0, 2.0], names=["w", "b"])
    r0 = [start(0), same, ev("step", opt=0, n=2, digest="bb", sums=[1.5, 2.0]), end()]
    r1 = [start(1), same, ev("step", opt=0, n=2, digest="cc", sums=[1.25, 2.0]), end()]
    out = judge("ddp.in_sync", run_of(r0, r1))
    assert out.status == "fail" and out.rank == 1
    assert "After optimizer step 2" in out.message and "'w'" in out.message
    assert "1.25" in out.message and "1.5" in out.message


def test_overlapping_shards_name_the_indices() -> None:
    r0 = [start(0), iteration([0, 1, 2, 3], 0), end()]
    r1 = [start(1), iteration([0, 1, 2, 3], 0), end()]
    out = judge("sampler.shards", run_of(r0, r1))
    assert out.status == "fail"
    assert (
        "Rank 0 and rank 1 both saw 4 of the same samples (indices 0-3) in their 1st pass"
        in out.message
    )


def test_probe_and_validation_iterations_are_not_training() -> None:
    probe = iteration([0, 1], 0, steps=0)
    r0 = [start(0), probe, iteration([0, 2, 4, 6], 0), iteration([1, 3, 5, 7], 1), end()]
    r1 = [start(1), probe, iteration([1, 3, 5, 7], 0), iteration([0, 2, 4, 6], 1), end()]
    run = run_of(r0, r1)
    assert judge("sampler.shards", run).status == "pass"
    assert judge("sampler.set_epoch", run).status == "pass"


def test_same_epoch_twice_fails_set_epoch() -> None:
    r0 = [start(0), iteration([0, 2, 4, 6], 0), iteration([0, 2, 4, 6], 0), end()]
    r1 = [start(1), iteration([1, 3, 5, 7], 0), iteration([1, 3, 5, 7], 0), end()]
    out = judge("sampler.set_epoch", run_of(r0, r1))
    assert out.status == "fail" and out.line == 30


def test_read_in_the_same_sync_epoch_as_the_write_is_a_race() -> None:
    save = ev("save", path="/w/m.pt", ok=True, model_state=True, sync=5, line=20)
    r0 = [start(0), save, end()]
    racing = [start(1), ev("load", path="/w/m.pt", ok=True, sync=5, line=22), end()]
    ordered = [start(1), ev("load", path="/w/m.pt", ok=True, sync=6, line=22), end()]
    assert judge("ckpt.barrier", run_of(r0, racing)).status == "fail"
    assert judge("ckpt.barrier", run_of(r0, ordered)).status == "pass"


def test_rename_into_place_counts_as_the_write() -> None:
    r0 = [
        start(0),
        ev("save", path="/w/m.tmp", ok=True, model_state=True, sync=3),
        ev("rename", src="/w/m.tmp", dst="/w/m.pt", sync=3),
        end(),
    ]
    r1 = [start(1), ev("load", path="/w/m.pt", ok=True, sync=3, line=9), end()]
    out = judge("ckpt.barrier", run_of(r0, r1))
    assert out.status == "fail" and out.rank == 1 and out.line == 9


def test_wrapped_state_dict_and_extra_writers() -> None:
    wrapped = {"model": True, "prefixed": 4, "sample": ["module.0.weight"], "loadable": False}
    save = ev(
        "save", path="/w/m.pt", ok=True, model_state=True, holds="state", state_dicts=[wrapped]
    )
    run = run_of([start(0), save, end()], [start(1), save, end()])
    assert "module.0.weight" in judge("ckpt.unwrapped", run).message
    out = judge("ckpt.rank0_only", run)
    assert out.status == "fail" and out.rank == 1


def _replay(**kw: Any) -> dict[str, Any]:
    base = {
        "status": "ok",
        "world_size": 2,
        "rel_error": 0.0,
        "ratio": 1.0,
        "norm_expected": 1.0,
        "norm_actual": 1.0,
        "micro_steps": {"0": 1, "1": 1},
        "loss_scales": {"0": [[1.0]], "1": [[1.0]]},
    }
    return ev("replay", **{**base, **kw})


def _grad_run(replay: dict[str, Any]) -> RunView:
    ddp = ev("ddp_init", module="Net", params=10)
    step = ev("step", opt=0, n=1, digest="a", sums=[], line=40)
    return run_of([start(0), ddp, step, replay, end()], [start(1), ddp, step, end()])


def test_grad_average_catches_summed_gradients_and_scaled_loss() -> None:
    summed = judge("ddp.grad_average", _grad_run(_replay(step_ratio=2.0, step_parallel=True)))
    assert summed.status == "fail" and "summed once more" in summed.message and summed.line == 40
    clipped = _replay(step_ratio=0.3, step_parallel=True, clipped=True)
    assert judge("ddp.grad_average", _grad_run(clipped)).status == "pass"
    unsynced = judge("ddp.grad_average", _grad_run(_replay(rel_error=0.4, ratio=1.1)))
    assert unsynced.status == "fail" and "not averaged" in unsynced.message
    scaled = judge("ddp.grad_average", _grad_run(_replay(loss_scales={"0": [[0.5]], "1": [[0.5]]})))
    assert scaled.status == "fail" and "1/2" in scaled.message
    quarter = [[0.25]] * 4
    accumulation = _replay(micro_steps={"0": 4, "1": 4}, loss_scales={"0": quarter, "1": quarter})
    assert judge("ddp.grad_average", _grad_run(accumulation)).status == "pass"
    two_losses = _replay(loss_scales={"0": [[0.5, 0.5]], "1": [[0.5, 0.5]]})
    assert judge("ddp.grad_average", _grad_run(two_losses)).status == "pass"


def test_gpu_pinning_is_skipped_on_cpu() -> None:
    assert judge("device.pinned", run_of([start(0), end()])).status == "skip"


def test_helpers() -> None:
    assert index_ranges([5, 0, 1, 2, 9]) == "0-2, 5, 9"
    dump = '  File "/x/site.py", line 3 in g\n  File "/work/main.py", line 8 in f\n'
    assert stack_line(dump, "/work/main.py") == 8


def test_copies_of_the_same_samples_overlap_across_different_datasets() -> None:
    rows = [[float(i), float(i % 7), float(i % 5), 1.0] for i in range(40)]
    jittered = [[v + 0.001 for v in row] for row in rows]
    other = [[float(i) + 0.5, 3.0, 2.0, -1.0] for i in range(40)]

    def its(samples: list[list[float]], data: str) -> dict[str, Any]:
        return iteration(list(range(40)), 0, dataset=data, dataset_len=40, samples=samples)

    copies = run_of([start(0), its(rows, "a"), end()], [start(1), its(jittered, "b"), end()])
    out = judge("sampler.shards", copies)
    assert out.status == "fail" and "40 of the same samples" in out.message
    shards = run_of([start(0), its(rows, "a"), end()], [start(1), its(other, "b"), end()])
    assert judge("sampler.shards", shards).status == "pass"


def test_the_rank_that_died_is_named_not_the_one_the_launcher_stopped() -> None:
    run = run_of([start(0)], [start(1)], exit_codes=[-15, -9])
    out = judge("run.completed", run)
    assert out.status == "fail" and out.rank == 1 and "SIGKILL" in out.message


def test_a_rank_that_aborted_in_a_collective_is_named_before_its_peers_reset() -> None:
    """Gloo aborts the rank whose all_reduce got more data than it expected (SIGABRT, no Python
    exception); its peer's "connection reset" comes a moment later and is only the consequence."""
    dump = "Fatal Python error: Aborted\n\nThread 0x1 (most recent call first):\n"
    dump += '  File "/work/main.py", line 42 in main\n'
    aborted = [start(0), ev("fatal", t=5.0, error="Aborted")]
    reset = ev(
        "exception",
        t=5.1,
        type="RuntimeError",
        message="Read error: Connection reset by peer",
        line=38,
    )
    run = run_of(aborted, [start(1), reset, end("exception")], exit_codes=[-6, 1])
    run.ranks[0].stack = dump
    run.ranks[0].output = (
        "terminate called after throwing an instance of 'gloo::EnforceNotMet'\n"
        "  what():  [enforce fail at pair.cc:456] op.preamble.length <= op.nbytes. 12 vs 4. "
        "Is there a distributed collective mismatch in your code?\n"
    )
    out = judge("run.completed", run)
    assert (out.status, out.rank, out.line) == ("fail", 0, 42)
    assert out.message.startswith("Rank 0 failed first, at line 42 (`line42`): it was killed by")
    assert "SIGABRT" in out.message and "collective mismatch" in out.message
    assert "Then rank 1 failed too" in out.message


def test_an_earlier_exception_still_comes_before_a_later_abort() -> None:
    crash = ev("exception", t=1.0, type="KeyError", message="'acc'", line=12)
    run = run_of(
        [start(0), crash, end("exception")],
        [start(1), ev("fatal", t=2.0, error="Aborted")],
        exit_codes=[1, -6],
    )
    out = judge("run.completed", run)
    assert (out.rank, out.line) == (0, 12)


def test_set_epoch_is_not_judged_when_the_run_stopped_in_its_first_epoch() -> None:
    crash = ev("exception", t=1.0, type="RuntimeError", message="boom", line=12)
    r0 = [start(0), iteration([0, 2, 4, 6], 0), crash, end("exception")]
    r1 = [start(1), iteration([1, 3, 5, 7], 0), end()]
    out = judge("sampler.set_epoch", run_of(r0, r1))
    assert out.status == "skip" and out.message.startswith("Not judged")
    assert judge(
        "sampler.set_epoch", run_of([start(0), crash, end("exception")])
    ).message.startswith("Not judged")


def test_a_fresh_sampler_with_the_same_seed_and_epoch_repeats_the_shuffle() -> None:
    """Two sampler objects (CPython may even give them the same id) drawing from the same seed
    and epoch hand out the same order: judged by (seed, epoch), not by object identity."""

    def its(indices: list[int], seed: int, sampler_id: int) -> dict[str, Any]:
        return iteration(
            indices, 0, seed=seed, sampler_id=sampler_id, num_replicas=2, sampler_rank=0
        )

    repeated = run_of([start(0), its([0, 2, 4, 6], 0, 1), its([0, 2, 4, 6][:3], 0, 2), end()])
    out = judge("sampler.set_epoch", repeated)
    assert out.status == "fail" and "seed 0 and epoch 0 (the value set_epoch" in out.message
    assert "1st and 2nd passes over the data" in out.message
    reseeded = run_of([start(0), its([0, 2, 4, 6], 0, 1), its([6, 4, 2, 0], 1, 1), end()])
    assert judge("sampler.set_epoch", reseeded).status == "pass"


def test_an_extra_save_names_the_file_it_was_renamed_to() -> None:
    save = ev("save", path="/w/ckpt.pt.77.tmp", ok=True, model_state=True, line=40, seq=5)
    rename = ev("rename", src="/w/ckpt.pt.77.tmp", dst="/w/ckpt.pt", line=41, seq=6)
    r0 = [start(0), ev("save", path="/w/ckpt.pt", ok=True, model_state=True, line=40), end()]
    out = judge("ckpt.rank0_only", run_of(r0, [start(1), save, rename, end()]))
    assert out.status == "fail" and "checkpoint ckpt.pt (" in out.message
    assert "saved as ckpt.pt.77.tmp at line 40" in out.message and "at line 41" in out.message


def test_hand_made_batches_are_judged_from_what_each_rank_trained_on() -> None:
    """No DataLoader: the samples the ranks' training forwards consumed, over each rank's first
    pass through its data (a reshuffled second epoch may reuse the other rank's samples)."""
    step = ev("step", opt=0, n=1, digest="aa", sums=[1.0])

    def rank(r: int, batches: list[list[str]]) -> list[dict[str, Any]]:
        return [start(r), step, ev("consumed", batches=batches), end()]

    disjoint = run_of(
        rank(0, [["a", "b"], ["c", "d"], ["e", "a"]]), rank(1, [["e", "f"], ["g", "h"], ["b", "e"]])
    )
    out = judge("sampler.shards", disjoint)
    assert out.status == "pass" and "rank 0: 4, rank 1: 4" in out.message
    same = run_of(rank(0, [["a", "b"], ["c", "d"]]), rank(1, [["c", "d"], ["a", "b"]]))
    out = judge("sampler.shards", same)
    assert out.status == "fail" and "both trained on 4 of the same samples" in out.message


def test_shards_are_not_judged_when_a_rank_died_before_reporting_its_data() -> None:
    crash = ev("exception", t=1.0, type="RuntimeError", message="Connection reset by peer")
    r0 = [start(0), ev("fatal", t=0.5, error="Aborted")]
    r1 = [start(1), iteration([1, 3, 5, 7], 0), crash, end("exception")]
    out = judge("sampler.shards", run_of(r0, r1, exit_codes=[-6, 1]))
    assert out.status == "skip" and out.message.startswith("Not judged")
