"""Wrong verdicts of issue 9, on synthetic traces: accumulation factors judged per mean over the
global batch, a loss that cannot train, compiled checkpoints, every DDP wrap and optimizer, ZeRO
judged by the state saved, and the messages that must be exact."""

from __future__ import annotations

from typing import Any

from grader.checks.base import RankView, RunView, get_check
from grader.harness.hooks.allreduce import local_gradient, mean_scale


def ev(kind: str, **data: Any) -> dict[str, Any]:
    return {"kind": kind, "file": "/work/main.py", **data}


def run_of(*ranks: list[dict[str, Any]], **kw: Any) -> RunView:
    views = [
        RankView(rank=i, exit_code=0, events=[{"seq": n, **e} for n, e in enumerate(evs)])
        for i, evs in enumerate(ranks)
    ]
    source = "\n".join(f"line{i}" for i in range(1, 100))
    return RunView(world_size=len(views), device="cpu", ranks=views, source=source, **kw)


def judge(check_id: str, run: RunView) -> Any:
    definition = get_check(check_id)
    assert definition is not None
    return definition.fn(run, {})


def end() -> dict[str, Any]:
    return ev("end", status="ok")


def replay_run(world: int, micro: int, scale: float, **kw: Any) -> RunView:
    """A lesson-2 run whose first step took `micro` micro-steps with the loss scaled by `scale`."""
    replay = ev(
        "replay",
        status="ok",
        world_size=world,
        rel_error=0.0,
        ratio=1.0,
        norm_expected=1.0,
        norm_actual=1.0,
        micro_steps={str(r): micro for r in range(world)},
        loss_scales={str(r): [[scale]] * micro for r in range(world)},
        backward_lines={str(r): [43] * micro for r in range(world)},
        **kw,
    )
    ddp = ev("ddp_init", module="Net", params=10)
    step = ev("step", opt=0, n=1, digest="a", sums=[], line=47)
    ranks = [
        [ev("start", rank=r), ddp, step, *([replay] if r == 0 else []), end()] for r in range(world)
    ]
    return run_of(*ranks)


def with_sibling(run: RunView, other: RunView) -> RunView:
    run.siblings, other.siblings = [other], [run]
    return run


def test_accumulation_factor_is_judged_per_mean_over_the_global_batch() -> None:
    # nanoGPT: steps //= world_size, loss / steps: 1/4 over 4 micro-steps at 1 rank, 1/2 over 2
    # at 2 ranks. Right at both sizes, although the factor changes.
    right = with_sibling(replay_run(2, 2, 0.5), replay_run(1, 4, 0.25))
    assert judge("ddp.grad_average", right).status == "pass"
    # loss / (steps * world_size): 1/4 at both sizes, but at 2 ranks each rank's own micro-steps
    # (2 of them) say the mean needs 1/2: half the gradient.
    wrong = with_sibling(replay_run(2, 2, 0.25), replay_run(1, 4, 0.25))
    out = judge("ddp.grad_average", wrong)
    assert out.status == "fail" and "over 2 accumulation micro-steps" in out.message
    assert out.line == 43 and "at line 43" in out.message  # the backward, not optimizer.step()
    # 0.5 * MSE at every size is a constant, not a division by the world size.
    constant = with_sibling(replay_run(2, 1, 0.5), replay_run(1, 1, 0.5))
    assert judge("ddp.grad_average", constant).status == "pass"


def test_a_loss_with_a_zero_gradient_is_not_judged_with_a_warning() -> None:
    zero = ev(
        "replay",
        status="zero_gradient",
        world_size=2,
        norm_actual=0.0,
        reason="the expected first-step gradient is zero",
    )
    ddp = ev("ddp_init", module="Net", params=10)
    step = ev("step", opt=0, n=1, digest="a", sums=[], line=30)
    run = run_of([ev("start"), ddp, step, zero, end()], [ev("start"), ddp, step, end()])
    out = judge("ddp.grad_average", run)
    # Averaging cannot show in a zero gradient: a warning, never a failed DDP check (issue 29).
    assert out.status == "skip" and out.message.startswith("Warning:")
    assert "cannot train" in out.message and "not judged" in out.message
    assert "cross_entropy over a single output column" in out.message


def test_allreduce_local_gradient_averages_the_micro_steps() -> None:
    # loss / ACCUM_STEPS (2) at 2 ranks: 1/2 is the accumulation's, not the world size's.
    assert mean_scale(0.5, None, 2, 2) == 0.5
    sketch = [[2.0, 4.0]]
    local, world_scaled = local_gradient([(sketch, 0.5, None), (sketch, 0.5, None)], 2)
    assert local == [[4.0, 8.0]] and not world_scaled  # the mean of the unscaled gradients
    # One micro-step with loss / world_size: the world size's factor.
    local, world_scaled = local_gradient([(sketch, 0.5, None)], 2)
    assert local == [[4.0, 8.0]] and world_scaled
    # Summed micro-steps without any factor: the mean is half their sum.
    local, _ = local_gradient([(sketch, 1.0, None), (sketch, 1.0, None)], 2)
    assert local == [[2.0, 4.0]]


def test_compiled_checkpoint_names_the_prefix_and_the_fix() -> None:
    compiled = {
        "model": True,
        "prefixed": 0,
        "compiled_prefixed": 4,
        "sample": ["_orig_mod.0.weight"],
        "loadable": False,
    }
    save = ev(
        "save",
        path="/w/c.pt",
        ok=True,
        model_state=True,
        holds="state",
        state_dicts=[compiled],
        line=28,
    )
    run = run_of([ev("start"), save, end()], [ev("start"), end()])
    out = judge("ckpt.unwrapped", run)
    assert out.status == "fail" and "'_orig_mod.0.weight'" in out.message
    assert "model._orig_mod.state_dict()" in out.message and "strip" in out.message
    assert "(1 save: c.pt)" in judge("ckpt.rank0_only", run).message


def bn_wrap(line: int, plain: list[str], synced: int) -> dict[str, Any]:
    return ev(
        "ddp_batchnorm", line=line, plain=plain, n_plain=len(plain), synced=[], n_synced=synced
    )


def convert(line: int, inside_ddp: bool = False) -> dict[str, Any]:
    return ev(
        "syncbn_convert",
        line=line,
        arg="Sequential",
        is_ddp=False,
        inside_ddp=inside_ddp,
        n_plain=1,
    )


def test_every_ddp_wrap_is_judged_for_syncbn() -> None:
    head = ["1 (BatchNorm1d)"]
    plain_head = [convert(10), bn_wrap(10, [], 1), bn_wrap(11, head, 0), end()]
    out = judge("syncbn.converted", run_of(plain_head, plain_head))
    assert out.status == "fail" and out.line == 11
    assert "The 2nd model" in out.message and "BatchNorm1d" in out.message
    both = [convert(10), bn_wrap(10, [], 1), convert(11), bn_wrap(11, [], 1), end()]
    assert judge("syncbn.converted", run_of(both, both)).status == "pass"
    assert judge("syncbn.before_wrap", run_of(both, both)).status == "pass"
    late = [bn_wrap(10, head, 0), convert(12, inside_ddp=True), end()]
    assert judge("syncbn.before_wrap", run_of(late, late)).status == "fail"


def test_every_optimizer_is_judged_by_ddp_wrapped() -> None:
    ddp = ev("ddp_init", module="Net", params=10)
    fwd = ev("ddp_forward", steps=0, line=20)
    first = ev("step", opt=0, n=1, ddp_frac=1.0, line=30, optimizer="SGD")
    second = ev("step", opt=1, n=1, ddp_frac=0.0, line=31, optimizer="Adam")
    rank = [ev("start"), ddp, fwd, first, second, end()]
    out = judge("ddp.wrapped", run_of(rank, rank))
    assert out.status == "fail" and out.line == 31 and "Adam" in out.message


def test_zero_is_judged_by_the_optimizer_that_stepped_and_the_state_saved() -> None:
    init = ev("zero_init", line=14, optimizer="Adam", n_params=4, n_local=2)
    adam = ev("step", opt=0, n=1, optimizer="Adam", line=22)
    rank = [ev("start"), init, adam, end()]
    out = judge("zero.optimizer", run_of(rank, rank))
    assert out.status == "fail" and "never stepped it" in out.message and out.line == 22

    zero = ev("step", opt=1, n=1, optimizer="ZeroRedundancyOptimizer", line=22)
    enter, leave = ev("consolidate_enter", line=18), ev("consolidate_exit", line=18)
    stale = {"compared": 2, "stale": 2, "param": 0, "saved_step": 0.0, "live_step": 4.0}
    save = ev("optimizer_state", line=26, listed=4, stated=0, n_params=4, live=stale)
    r0 = [ev("start"), init, enter, leave, adam, zero, save, end()]
    r1 = [ev("start"), init, enter, leave, adam, zero, end()]
    out = judge("zero.consolidated", run_of(r0, r1))
    assert out.status == "fail" and "is stale" in out.message and out.line == 26
    assert "0 steps in the saved state, 4 in the live optimizer" in out.message
    fresh = {"compared": 2, "stale": 0}
    r0[-2] = ev("optimizer_state", line=26, listed=4, stated=4, n_params=4, live=fresh)
    assert judge("zero.consolidated", run_of(r0, r1)).status == "pass"


def test_random_split_per_rank_says_to_seed_the_generator() -> None:
    def its(rank: int, subset: str) -> dict[str, Any]:
        return ev(
            "iteration",
            indices=[0, 1, 2, 3],
            count=4,
            epoch=0,
            distributed=True,
            shuffle=True,
            seed=0,
            num_replicas=2,
            sampler_rank=rank,
            subset=subset,
            dataset="d",
            dataset_len=16,
            loader_len=8,
            batch_size=4,
            exhausted=True,
            steps=1,
            line=30,
        )

    run = run_of([ev("start"), its(0, "a"), end()], [ev("start"), its(1, "b"), end()])
    out = judge("sampler.shards", run)
    assert out.status == "fail" and "in their 1st pass over the data" in out.message
    assert "Seed the generator" in out.message


def test_every_process_saving_on_one_node_is_reported_by_the_one_node_run() -> None:
    save = ev("save", path="/w/weights.pt", ok=True, model_state=True, line=29)
    out = judge("launch.multinode", run_of([save, end()], [save, end()]))
    assert out.status == "fail" and "ranks 0 and 1 each saved weights.pt" in out.message
    assert judge("launch.multinode", run_of([save, end()], [end()])).status == "skip"


def test_a_line_search_closure_returning_each_ranks_own_loss_fails() -> None:
    def rank(loss: float) -> list[dict[str, Any]]:
        closure = ev("closure_loss", call=1, step=0, loss=loss, line_search="strong_wolfe", line=33)
        return [ev("start"), closure, ev("step", opt=0, n=1, digest="d", sums=[1.0]), end()]

    out = judge("ddp.in_sync", run_of(rank(0.61), rank(0.53)))
    assert out.status == "fail" and out.rank == 1 and out.line == 33
    assert "closure returned 0.53 on rank 1 and 0.61 on rank 0" in out.message
    assert judge("ddp.in_sync", run_of(rank(0.57), rank(0.57))).status == "pass"


def test_equivalence_sees_what_parameter_sums_cannot() -> None:
    # A two-class softmax layer's rows move in opposite directions: equal sums, other weights.
    def steps(square: float) -> list[dict[str, Any]]:
        return [
            ev("step", opt=0, n=1, digest="a", sums=[0.5], squares=[2.0], names=["fc.weight"]),
            ev("step", opt=0, n=2, digest=f"b{square}", sums=[0.5], squares=[square]),
        ]

    fault = ev("fault", rank=1, after_steps=1, attempt=0, placed="snapshot", snapshot_step=0)
    save = ev("save", ok=True, path="/w/s.pt", model_state=True, attempt=0)
    faulted = [
        {**e, "attempt": 1} for e in [ev("load", ok=True, path="/w/s.pt"), *steps(3.0)[1:], end()]
    ]
    reference = run_of([*steps(2.5), end()], [*steps(2.5), end()])
    run = run_of([save, *faulted], [fault, *faulted], reference=reference)
    out = judge("elastic.equivalent", run)
    assert out.status == "fail" and "sum of squares of fc.weight is 3" in out.message
