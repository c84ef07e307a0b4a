"""The overlap-buckets checks (grader/checks/overlap*.py) on hand-made traces (no sandbox): each
bug of issue 24 named with its bucket and numbers, and the messages in tr and pt-BR."""

from __future__ import annotations

from typing import Any

import pytest

from grader.checks import overlap_model as om
from grader.checks.base import get_check
from grader.events import OverlapParams
from grader.harness.hooks import overlap as hook
from tests.grader.exercises.test_exercise_checks import run_of
from tests.grader.exercises.test_exercise_messages import assert_translated

CAP = {"cap_bytes": 100}
# Three parameters of 40, 80 and 20 bytes: in ready order (2, 1, 0) a cap of 100 bytes gives
# bucket 1 = params 2 and 1 (100 bytes), bucket 2 = param 0 (40 bytes).
PARAMS = {
    "kind": "overlap_params",
    "names": ["fc1.weight", "fc2.weight", "fc2.bias"],
    "numels": [10, 20, 5],
    "itemsizes": [4, 4, 4],
    "source": "optimizer",
}
LOCAL = {0: [[1.0, 2.0], [3.0, 1.0], [0.5, 0.5]], 1: [[3.0, 0.0], [1.0, 1.0], [1.5, -0.5]]}
MEAN = [[2.0, 1.0], [2.0, 1.0], [1.0, 0.0]]
GOOD = [["r", 2], ["r", 1], ["a", 0], ["r", 0], ["a", 1], ["e"], ["w", 0, 51], ["w", 1, 51], ["s"]]


def call(nbytes: int, line: int = 40, is_async: bool = True) -> dict[str, Any]:
    return {"numel": nbytes // 4, "bytes": nbytes, "async": is_async, "line": line}


def step(rank: int, **kw: Any) -> dict[str, Any]:
    record = {
        "kind": "overlap_step",
        "n": 1,
        "line": 60,
        "timeline": GOOD,
        "calls": [call(100), call(40)],
        "local": LOCAL[rank],
        "used": MEAN,
    }
    return {**record, **kw}


def run(*extra: dict[str, Any], **per_rank: Any) -> Any:
    return run_of(
        {
            r: [PARAMS, step(r, **per_rank.get(f"r{r}", per_rank.get("both", {}))), *extra]
            for r in (0, 1)
        },
        source="\n".join(f"line{i}()" for i in range(1, 80)),
    )


def judge(check_id: str, trace: Any) -> Any:
    definition = get_check(check_id)
    assert definition is not None
    return definition.fn(trace, CAP)


def test_the_hook_and_the_checks_follow_the_same_steps() -> None:
    assert om.FOLLOWED_STEPS == hook.MAX_STEPS


def test_buckets_fill_in_the_given_order_and_a_large_gradient_is_a_bucket_alone() -> None:
    layout = om.fill([3, 2, 1, 0], [8, 200, 30, 50], 100)  # sizes by parameter index
    assert layout.buckets == [[3, 2], [1], [0]] and layout.sizes == [80, 200, 8]
    params = OverlapParams.parse(PARAMS)
    assert [x.sizes for x in om.layouts(params, [], 100)] == [[100, 40]]


@pytest.mark.parametrize(
    "check_id", ["overlap.grad_mean", "overlap.overlapped", "overlap.buckets", "overlap.once"]
)
def test_a_correct_overlapped_bucketed_step_passes(check_id: str) -> None:
    assert judge(check_id, run()).status == "pass"


def test_a_summed_bucket_is_named_with_its_factor() -> None:
    summed = [[2 * v for v in row] for row in MEAN]
    out = judge("overlap.grad_mean", run(both={"used": summed}))
    assert out.status == "fail" and out.rank == 0 and out.line == 60
    assert "2× the mean" in out.message and "(bucket" in out.message
    assert_translated("overlap.grad_mean", out, "2")


def test_a_wait_right_after_the_all_reduce_is_no_overlap() -> None:
    timeline = [
        ["r", 2],
        ["r", 1],
        ["a", 0],
        ["w", 0, 45],
        ["r", 0],
        ["e"],
        ["a", 1],
        ["w", 1, 51],
        ["s"],
    ]
    out = judge("overlap.overlapped", run(both={"timeline": timeline}))
    assert out.status == "fail" and out.line == 45
    assert "bucket 1's all-reduce right after issuing it" in out.message
    assert_translated("overlap.overlapped", out, "45")


def test_all_reduces_after_backward_did_not_overlap() -> None:
    timeline = [
        ["r", 2],
        ["r", 1],
        ["r", 0],
        ["e"],
        ["a", 0],
        ["a", 1],
        ["w", 0, 51],
        ["w", 1, 51],
        ["s"],
    ]
    out = judge("overlap.overlapped", run(both={"timeline": timeline}))
    assert out.status == "fail" and "only after every gradient was ready" in out.message
    assert "2 buckets" in out.message


def test_a_later_bucket_held_back_until_after_backward_did_not_overlap() -> None:
    # Bucket 1 goes out from the hook; bucket 2 (fc1.weight), ready during backward too, only
    # after backward returned: only the first bucket overlapped.
    timeline = [["r", 2], ["r", 1], ["a", 0], ["r", 0], ["e"], ["a", 1], ["w", 0, 51], ["w", 1, 51]]
    out = judge("overlap.overlapped", run(both={"timeline": [*timeline, ["s"]]}))
    assert out.status == "fail" and out.rank == 0
    assert "bucket 2 (fc1.weight)" in out.message
    assert "only after backward() had returned" in out.message and "2 buckets" in out.message
    assert_translated("overlap.overlapped", out, "fc1.weight")


def test_readiness_seen_by_a_tensor_hook_counts_before_accumulation() -> None:
    # A Tensor.register_hook hook sees each gradient (an "r" event) before it is accumulated
    # (a second "r" for the same parameter): the first one is when it was ready.
    timeline = [
        ["r", 2],
        ["r", 1],
        ["a", 0],
        ["r", 2],
        ["r", 1],
        ["r", 0],
        ["a", 1],
        ["r", 0],
        ["e"],
        ["w", 0, 51],
        ["w", 1, 51],
        ["s"],
    ]
    for check_id in ("overlap.overlapped", "overlap.buckets"):
        assert judge(check_id, run(both={"timeline": timeline})).status == "pass", check_id


def test_one_all_reduce_per_tensor_of_a_complete_bucket_fails_and_says_why() -> None:
    # Bucket 1's two tensors go out together once both are ready, but as two all-reduces.
    timeline = [
        ["r", 2],
        ["r", 1],
        ["a", 0],
        ["a", 1],
        ["r", 0],
        ["a", 2],
        ["e"],
        ["w", 0, 51],
        ["w", 1, 51],
        ["w", 2, 51],
        ["s"],
    ]
    out = judge(
        "overlap.buckets", run(both={"timeline": timeline, "calls": [call(20), call(80), call(40)]})
    )
    assert out.status == "fail" and out.line == 40
    assert "bucket 1 (fc2.bias, fc2.weight, 100 bytes) as 2 all-reduces" in out.message
    assert "one per tensor" in out.message and "latency once" in out.message
    assert_translated("overlap.buckets", out, "fc2.bias")


def test_a_synchronous_all_reduce_in_a_hook_is_named() -> None:
    out = judge("overlap.overlapped", run(both={"calls": [call(100, is_async=False), call(40)]}))
    assert out.status == "fail" and "without async_op=True" in out.message


def test_a_wait_after_the_step_is_named_with_both_lines() -> None:
    timeline = [["r", 2], ["r", 1], ["a", 0], ["r", 0], ["a", 1], ["e"], ["s"]]
    late = {"kind": "overlap_late_wait", "n": 1, "k": 0, "line": 70}
    out = judge("overlap.overlapped", run(late, both={"timeline": timeline}))
    assert out.status == "fail" and out.line == 70
    assert "only after optimizer.step() at line 60" in out.message and "bucket 1" in out.message
    never = judge("overlap.overlapped", run(both={"timeline": timeline}))
    assert "never waited on bucket 1" in never.message


def test_one_all_reduce_per_parameter_is_named_as_pieces_of_a_bucket() -> None:
    timeline = [
        ["r", 2],
        ["a", 0],
        ["r", 1],
        ["a", 1],
        ["r", 0],
        ["e"],
        ["a", 2],
        ["w", 0, 51],
        ["w", 1, 51],
        ["w", 2, 51],
        ["s"],
    ]
    out = judge(
        "overlap.buckets", run(both={"timeline": timeline, "calls": [call(20), call(80), call(40)]})
    )
    assert out.status == "fail"
    assert "bucket 1 (fc2.bias, fc2.weight, 100 bytes) as 2 all-reduces" in out.message
    assert_translated("overlap.buckets", out, "fc2.bias")


def test_buckets_in_the_forward_order_show_their_sizes() -> None:
    out = judge("overlap.buckets", run(both={"calls": [call(40), call(100)]}))
    assert out.status == "fail"
    assert "bucket 1" in out.message and "40 bytes where 100 were due" in out.message
    assert "2 buckets of 100, 40 bytes" in out.message


def test_a_bucket_sent_before_its_gradients_are_ready() -> None:
    timeline = [
        ["r", 2],
        ["a", 0],
        ["r", 1],
        ["r", 0],
        ["e"],
        ["a", 1],
        ["w", 0, 51],
        ["w", 1, 51],
        ["s"],
    ]
    out = judge("overlap.buckets", run(both={"timeline": timeline}))
    assert out.status == "fail" and "before the gradient of fc2.weight was ready" in out.message


def test_buckets_that_differ_between_ranks_name_the_bucket_and_both_sizes() -> None:
    def coll(rank: int, i: int, numel: int) -> dict[str, Any]:
        return {
            "kind": "collective_call",
            "op": "all_reduce",
            "numel": numel,
            "dtype": "float32",
            "line": 40 + rank,
            "step": 0,
            "i": i,
        }

    trace = run_of(
        {
            0: [PARAMS, coll(0, 1, 25), coll(0, 2, 10), step(0)],
            1: [PARAMS, coll(1, 1, 25), coll(1, 2, 6), step(1)],
        }
    )
    out = judge("overlap.buckets", trace)
    assert out.status == "fail" and out.rank == 1
    assert "bucket 2 differs between the ranks: rank 0 all-reduced 10 values" in out.message
    assert "rank 1 6 values" in out.message
    assert_translated("overlap.buckets", out, "6")


def test_a_gradient_left_out_or_sent_twice_is_counted_in_bytes() -> None:
    missed = judge("overlap.once", run(r1={"calls": [call(80), call(40)]}))
    assert missed.status == "fail" and missed.rank == 1
    assert "20 bytes were never all-reduced, in bucket 1" in missed.message
    twice = judge(
        "overlap.once",
        run(
            both={
                "calls": [call(100), call(40), call(40)],
                "timeline": [*GOOD[:-1], ["a", 2], ["w", 2, 52], ["s"]],
            }
        ),
    )
    assert twice.status == "fail" and "40 bytes went out twice" in twice.message
    assert_translated("overlap.once", missed, "20")


def test_ddp_is_refused_with_its_line() -> None:
    out = judge("overlap.no_ddp", run({"kind": "ddp_init", "line": 33}))
    assert out.status == "fail" and out.line == 33 and "DistributedDataParallel" in out.message
