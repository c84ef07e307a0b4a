"""Pure tests of the lesson 1, 3 and 4 checks on hand-made traces (no sandbox), including the
GPU-only path of syncbn.stats_synced, which this CPU machine cannot run for real."""

from __future__ import annotations

from typing import Any

from grader.checks.base import RankView, RunView, get_check
from grader.contract import ExerciseSpec, FaultSpec, LaunchSpec
from grader.inside.multinode import node_env
from grader.launch.plan import plan_launches


def run_of(events: dict[int, list[dict[str, Any]]], device: str = "cpu", **kw: Any) -> RunView:
    ranks = [
        RankView(rank=r, exit_code=0, events=[{"seq": i, **e} for i, e in enumerate(evs)])
        for r, evs in sorted(events.items())
    ]
    return RunView(world_size=len(ranks), device=device, ranks=ranks, **kw)


def judge(check_id: str, run: RunView) -> Any:
    definition = get_check(check_id)
    assert definition is not None
    return definition.fn(run, {})


def stats(layer: str, mean: str, mean_sum: float) -> dict[str, Any]:
    return {
        "kind": "bn_stats",
        "layer": layer,
        "mean": mean,
        "var": "v",
        "mean_sum": mean_sum,
        "var_sum": 1.0,
    }


def test_stats_synced_is_skipped_on_cpu_with_the_reason() -> None:
    out = judge("syncbn.stats_synced", run_of({0: [], 1: []}))
    assert out.status == "skip"
    assert "only on GPUs" in out.message


def test_stats_synced_on_gpu_passes_when_equal_and_names_the_layer_when_not() -> None:
    same = run_of({r: [stats("1", "a", 0.5), stats("1", "b", 0.7)] for r in (0, 1)}, "cuda")
    assert judge("syncbn.stats_synced", same).status == "pass"
    differ = run_of({0: [stats("1", "a", 0.5)], 1: [stats("1", "z", 0.9)]}, "cuda")
    out = judge("syncbn.stats_synced", differ)
    assert out.status == "fail"
    assert "layer 1's running_mean" in out.message and out.rank == 1


def grads(local: list[list[float]], used: list[list[float]]) -> dict[str, Any]:
    return {"kind": "hand_grads", "names": ["w", "b"], "local": local, "used": used, "line": 30}


def coll(line: int = 20) -> dict[str, Any]:
    return {
        "kind": "collective_call",
        "op": "all_reduce",
        "numel": 3,
        "dtype": "float32",
        "redop": "SUM",
        "line": line,
        "step": 0,
    }


def test_grad_average_names_a_sum_that_was_not_divided() -> None:
    l0, l1 = [[1.0, 2.0], [3.0]], [[3.0, 4.0], [5.0]]
    summed = [[4.0, 6.0], [8.0]]
    run = run_of({0: [coll(), grads(l0, summed)], 1: [coll(), grads(l1, summed)]})
    out = judge("allreduce.grad_average", run)
    assert out.status == "fail"
    assert "summed over the 2 ranks but not divided" in out.message and out.line == 20
    mean = [[2.0, 3.0], [4.0]]
    ok = run_of({0: [coll(), grads(l0, mean)], 1: [coll(), grads(l1, mean)]})
    assert judge("allreduce.grad_average", ok).status == "pass"


def test_collectives_match_names_the_call_without_a_partner() -> None:
    run = run_of({0: [coll(20), coll(20)], 1: [coll(20)]}, timed_out=True)
    out = judge("allreduce.collectives_match", run)
    assert out.status == "fail" and "no partner on rank 1" in out.message
    assert "until the run was stopped" in out.message


def test_consolidate_on_rank0_only_names_ranks_and_lines() -> None:
    run = run_of(
        {
            0: [{"kind": "consolidate_enter", "line": 70}],
            1: [{"kind": "barrier_enter", "line": 79}, {"kind": "exception", "line": 79}],
        },
        source="\n".join(f"line{i}" for i in range(1, 100)),
    )
    out = judge("zero.consolidated", run)
    assert out.status == "fail" and out.rank == 0 and out.line == 70
    assert "called on rank 0 only at line 70" in out.message
    assert "never returned" in out.message
    assert "rank 1 went on without it and was last seen at line 79" in out.message


def test_plan_adds_a_reference_twin_and_a_multinode_launch() -> None:
    spec = ExerciseSpec(
        checks=["run.completed"],
        launch=LaunchSpec(world_sizes=[2], max_restarts=1, faults=[FaultSpec()], multinode=True),
    )
    plans = plan_launches(spec)
    assert [(p.world_size, p.nnodes, bool(p.faults), p.judged) for p in plans] == [
        (2, 1, False, False),
        (2, 1, True, True),
        (2, 2, False, True),
    ]
    assert plans[1].reference == 0


def test_each_simulated_node_sees_its_own_gpus(monkeypatch: Any) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    assert [node_env(n, 2)["CUDA_VISIBLE_DEVICES"] for n in (0, 1)] == ["4,5", "6,7"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert node_env(1, 1)["CUDA_VISIBLE_DEVICES"] == ""


def test_launch_env_names_a_sampler_built_for_a_hard_coded_world() -> None:
    env = {"kind": "launch_env", "rank": "0", "local_rank": "0", "world_size": "3"}
    events = {
        r: [
            env,
            {"kind": "init", "rank": r, "world_size": 3, "line": 5},
            {
                "kind": "iteration",
                "distributed": True,
                "num_replicas": 2,
                "sampler_rank": r,
                "line": 9,
            },
            {"kind": "end", "status": "ok"},
        ]
        for r in range(3)
    }
    out = judge("launch.env", run_of(events))
    assert out.status == "fail" and "built for 2 replicas" in out.message


def ddp_bn(n_plain: int, n_synced: int) -> dict[str, Any]:
    plain = ["1 (BatchNorm1d)"] * n_plain
    return {
        "kind": "ddp_batchnorm",
        "line": 40,
        "plain": plain,
        "n_plain": n_plain,
        "n_synced": n_synced,
    }


def test_converted_judges_the_live_modules_not_the_source() -> None:
    # A program that names SyncBatchNorm but converts only when CUDA is available: on a CPU
    # worker DDP wrapped plain BatchNorm, whatever the source text says.
    source = (
        "if torch.cuda.is_available():\n    model = nn.SyncBatchNorm.convert_sync_batchnorm(m)\n"
    )
    run = run_of({0: [ddp_bn(1, 0)], 1: [ddp_bn(1, 0)]}, source=source)
    out = judge("syncbn.converted", run)
    assert out.status == "fail"
    assert "not only when CUDA is available" in out.message and "1 (BatchNorm1d)" in out.message
    assert judge("syncbn.before_wrap", run).status == "fail"
    ok = run_of({0: [ddp_bn(0, 1)], 1: [ddp_bn(0, 1)]})
    assert judge("syncbn.converted", ok).status == "pass"
    assert judge("syncbn.before_wrap", ok).status == "pass"


def test_world_scale_tells_a_divided_loss_from_a_hand_written_mean() -> None:
    import torch

    from grader.harness.hooks.allreduce import world_scale

    x = torch.randn(8, 1, requires_grad=True)
    errors = (x - torch.randn(8, 1)) ** 2
    assert world_scale(errors.mean(), None, 2) == 1.0
    assert world_scale(errors.sum() / len(x), None, 2) == 1.0
    assert world_scale(errors.mean() / 2, None, 2) == 0.5
    assert world_scale(errors.sum() / (len(x) * 2), None, 2) == 0.5
    assert world_scale(errors.mean() / 2, None, 3) == 1.0
    assert world_scale(errors.sum(), None, 2) == 1.0


def attempt(kind: str, n: int, **data: Any) -> dict[str, Any]:
    return {"kind": kind, "attempt": n, "file": "/job/main.py", **data}


def test_completed_after_restart_names_the_attempt_and_the_cause() -> None:
    faulted = {
        0: [attempt("start", 0), attempt("start", 1), attempt("end", 1, status="ok")],
        1: [
            attempt("start", 0),
            attempt("fault", 0, rank=1, after_steps=3),
            attempt("start", 1),
            attempt("end", 1, status="ok"),
        ],
    }
    out = judge("run.completed", run_of(faulted))
    assert out.status == "pass"
    assert "in attempt 2, after torchrun restarted the ranks once" in out.message
    crashed = {
        0: [attempt("start", 0), attempt("start", 1), attempt("end", 1, status="ok")],
        1: [
            attempt("start", 0),
            attempt("exception", 0, type="KeyError", message="'epoch'", line=12, t=1.0),
            attempt("start", 1),
            attempt("end", 1, status="ok"),
        ],
    }
    out = judge("run.completed", run_of(crashed))
    assert out.status == "fail"
    assert out.message.startswith("Attempt 1 ended without the grader's injected failure")
    assert "KeyError" in out.message
