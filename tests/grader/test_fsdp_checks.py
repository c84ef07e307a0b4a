"""The fsdp-reshard checks on hand-made traces (no sandbox), and the job dir a resumed launch
starts from (`launch.resume`). The real runs: tests/grader/exercises/fsdp-reshard/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grader.checks.base import RankView, RunView, get_check
from grader.contract import ExerciseSpec
from grader.launch.host import _carry_out, _stage
from grader.launch.plan import plan_launches
from grader.launch.wire import SupervisorConfig

NAMES = ["0.weight", "0.bias"]
FULL = [64, 8]


def state(
    when: str, rank: int, world: int, sums: list[float], opt: list[float | None], steps: int = 4
) -> dict[str, Any]:
    local = [n // world for n in FULL]
    return {
        "kind": "fsdp_state",
        "when": when,
        "line": 30,
        "steps": steps,
        "names": NAMES,
        "dtensor": [True, True],
        "local": local,
        "full": FULL,
        "sums": sums,
        "squares": [abs(s) for s in sums],
        "opt_sums": opt,
        "optimizer": "AdamW",
    }


def dcp_save(line: int = 40) -> dict[str, Any]:
    return {"kind": "save", "target": "dcp", "ok": True, "path": "/work/ckpt", "line": line}


def replay(world: int, step: int, sums: list[float]) -> dict[str, Any]:
    return {
        "kind": "dcp_replay",
        "path": "/work/ckpt",
        "line": 40,
        "files": {f"__{r}_0.distcp": 2 for r in range(world)},
        "tensors": {
            f"app.model.{n}": [float(f), s, abs(s)]
            for n, f, s in zip(NAMES, FULL, sums, strict=True)
        },
        "counters": {"app.step": step},
    }


def run_of(events: dict[int, list[dict[str, Any]]], **kw: Any) -> RunView:
    ranks = [
        RankView(rank=r, exit_code=0, events=[{"seq": i, **e} for i, e in enumerate(evs)])
        for r, evs in sorted(events.items())
    ]
    for r in ranks:  # every rank ran to its end
        r.events.append({"seq": len(r.events), "kind": "end"})
    return RunView(world_size=len(ranks), device="cpu", ranks=ranks, **kw)


def judge(check_id: str, run: RunView) -> Any:
    definition = get_check(check_id)
    assert definition is not None
    return definition.fn(run, {})


def saved_at_two(step: int = 4) -> RunView:
    """2 ranks: trained 4 steps, saved weights summing to 1.0 and 2.0, optimizer state 0.5."""
    per_rank = {
        r: [
            state("first_step", r, 2, [0.1, 0.1], [None, None], steps=0),
            state("save", r, 2, [0.5, 1.0], [0.25, 0.25]),
            dcp_save(),
        ]
        for r in (0, 1)
    }
    per_rank[0].append(replay(2, step, [1.0, 2.0]))
    return run_of(per_rank)


def resumed_at_three(
    prev: RunView, start: list[float], opt: list[float | None], step: int
) -> RunView:
    per_rank = {
        r: [
            {"kind": "load", "path": "/work/ckpt", "ok": True, "line": 20},
            state("first_step", r, 3, [s / 3 for s in start], opt, steps=0),
            state("save", r, 3, [0.3, 0.3], [0.1, 0.1]),
            dcp_save(),
        ]
        for r in (0, 1, 2)
    }
    per_rank[0].append(replay(3, step, [0.9, 0.9]))
    return run_of(per_rank, resumed_from=prev)


def test_a_resumed_run_that_continues_passes_every_check() -> None:
    prev = saved_at_two()
    run = resumed_at_three(prev, [1.0, 2.0], [0.5 / 3, 0.5 / 3], step=8)
    for check_id in ("fsdp.sharded", "fsdp.own_shards", "fsdp.resumed_weights"):
        assert judge(check_id, run).status == "pass", check_id
    assert judge("fsdp.optimizer_resumed", run).status == "pass"
    out = judge("fsdp.step_continues", run)
    assert out.status == "pass" and "app.step = 8" in out.message


def test_resuming_at_step_zero_says_the_steps_were_trained_twice() -> None:
    run = resumed_at_three(saved_at_two(), [1.0, 2.0], [0.5 / 3, 0.5 / 3], step=4)
    out = judge("fsdp.step_continues", run)
    assert out.status == "fail"
    assert "app.step = 4" in out.message and "counted from 0 again" in out.message


def test_fresh_weights_and_a_fresh_optimizer_are_named() -> None:
    run = resumed_at_three(saved_at_two(), [0.3, 0.3], [0.0, 0.0], step=8)
    weights = judge("fsdp.resumed_weights", run)
    assert weights.status == "fail" and "0.weight" in weights.message
    assert "saved as 1" in weights.message and weights.line == 30
    optimizer = judge("fsdp.optimizer_resumed", run)
    assert optimizer.status == "fail" and "fresh state" in optimizer.message


def test_the_first_launch_is_not_judged_on_resuming() -> None:
    prev = saved_at_two()
    assert judge("fsdp.resumed_weights", prev).status == "skip"
    assert judge("fsdp.step_continues", prev).status == "skip"


def test_a_plain_tensor_and_a_rank0_torch_save_fail_with_the_rank() -> None:
    plain = state("first_step", 1, 2, [0.1, 0.1], [None, None])
    plain["dtensor"] = [True, False]
    run = run_of({0: [state("first_step", 0, 2, [0.1, 0.1], [None, None])], 1: [plain]})
    out = judge("fsdp.sharded", run)
    assert out.status == "fail" and out.rank == 1 and "0.bias" in out.message
    save = {
        "kind": "save",
        "target": "path",
        "ok": True,
        "path": "/work/full.pt",
        "line": 50,
        "model_state": True,
    }
    rank0 = run_of({0: [save], 1: []})
    out = judge("fsdp.own_shards", rank0)
    assert out.status == "fail" and "Only rank 0" in out.message and "full.pt" in out.message


def test_a_resumed_launch_starts_from_the_previous_job_dir(tmp_path: Path) -> None:
    spec = ExerciseSpec.model_validate(
        {"checks": ["run.completed"], "launch": {"world_sizes": [2, 3, 1], "resume": True}}
    )
    assert [launch.world_size for launch in plan_launches(spec)] == [2, 3, 1]
    first, carry, second = tmp_path / "a", tmp_path / "carry", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    config = SupervisorConfig(nonce="n", world_size=2, wall_seconds=10.0, output_cap=1000)
    _stage(first, "print(1)", ".rdv-config-1.json", config, carry=carry)  # nothing carried yet
    (first / "ckpt").mkdir()
    (first / "ckpt" / "__0_0.distcp").write_bytes(b"shard")
    (first / ".rdv-report-x.json").write_text("{}")
    _carry_out(first, carry)
    assert sorted(p.name for p in carry.rglob("*")) == ["__0_0.distcp", "ckpt"]
    _stage(second, "print(2)", ".rdv-config-2.json", config, carry=carry)
    assert (second / "ckpt" / "__0_0.distcp").read_bytes() == b"shard"
    assert (second / "main.py").read_text() == "print(2)"


def with_counters(run: RunView, counters: dict[str, int]) -> RunView:
    """The run with its checkpoint's integers replaced (rank 0's dcp_replay record)."""
    for e in run.ranks[0].events:
        if e["kind"] == "dcp_replay":
            e["counters"] = counters
    return run


def nanogpt(iter_num: int) -> dict[str, int]:
    """The integers of a nanoGPT-style checkpoint: the model's shape first, then iter_num."""
    return {"app.model_args.n_layer": 2, "app.model_args.n_embd": 16, "app.iter_num": iter_num}


def test_the_counter_is_the_integer_that_changes_and_a_last_index_resumes_at_plus_one() -> None:
    # The first run took 4 steps and saved iter_num = 3, the index of its last step.
    prev = with_counters(saved_at_two(), nanogpt(3))
    right = resumed_at_three(prev, [1.0, 2.0], [0.5 / 3, 0.5 / 3], step=0)
    out = judge("fsdp.step_continues", with_counters(right, nanogpt(7)))
    assert out.status == "pass" and "app.iter_num = 7" in out.message, out.message
    twice = resumed_at_three(prev, [1.0, 2.0], [0.5 / 3, 0.5 / 3], step=0)
    out = judge("fsdp.step_continues", with_counters(twice, nanogpt(5)))
    assert out.status == "fail" and "app.iter_num = 5" in out.message
    assert "already trained" in out.message
