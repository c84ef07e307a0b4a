"""The find-the-hang checks (grader/checks/hang.py) on hand-made traces (no sandbox), and their
messages in Turkish and Portuguese."""

from __future__ import annotations

from typing import Any

from tests.grader.exercises.test_exercise_checks import judge, run_of
from tests.grader.exercises.test_exercise_messages import assert_translated, source


def call(line: int, numel: int = 1, op: str = "all_reduce", direct: bool = True) -> dict[str, Any]:
    return {
        "kind": "collective_call",
        "op": op,
        "numel": numel,
        "dtype": "float32",
        "redop": "SUM" if op == "all_reduce" else None,
        "line": line,
        "direct": direct,
    }


def forward(n: int, line: int = 30, in_join: bool = False) -> dict[str, Any]:
    return {"kind": "synced_forward", "n": n, "line": line, "numel": 18, "in_join": in_join}


END = {"kind": "end", "status": "ok"}


def test_the_metric_of_rank_0_against_the_extra_ddp_step_names_both_lines() -> None:
    rank0 = [forward(1), forward(2), call(40)]
    rank1 = [forward(1), forward(2), forward(3)]
    out = judge("hang.same_collectives", run_of({0: rank0, 1: rank1}, source=source()))
    assert out.status == "fail" and (out.rank, out.line) == (0, 40)
    assert "collective #3 differs: rank 0 called all_reduce of 1 float32 values at line 40" in (
        out.message
    )
    assert "rank 1 called DDP's gradient all-reduce (18 values)" in out.message
    texts = assert_translated("hang.same_collectives", out, "40. satırda (`x40 = 40`)")
    assert "na linha 30 (`x30 = 30`)" in texts["pt-BR"]


def test_a_stopped_run_says_where_each_rank_was_learner_line_first() -> None:
    stuck = {"kind": "exception", "type": "RuntimeError", "message": "timed out", "line": 40}
    rank0 = [forward(1), call(40), stuck]
    rank1 = [forward(1), forward(2), {**stuck, "line": 30}]
    out = judge("hang.same_collectives", run_of({0: rank0, 1: rank1}, source=source()))
    assert out.status == "fail"
    assert out.message.endswith(
        "When the run stopped: rank 0 was at line 40 (`x40 = 40`); "
        "rank 1 was at line 30 (`x30 = 30`)."
    )
    assert_translated("hang.same_collectives", out, "Çalışma durduğunda")


def test_a_call_without_partner_names_the_rank_that_waited() -> None:
    run = run_of({0: [call(12), call(40), END], 1: [call(12), END]}, source=source())
    out = judge("hang.same_collectives", run)
    assert out.status == "fail" and (out.rank, out.line) == (0, 40)
    assert "Rank 0 made 2 collectives and rank 1 only 1" in out.message
    assert "When the run stopped" not in out.message  # every rank ended: no stack to show
    assert_translated("hang.same_collectives", out)


def test_join_shadowing_and_torch_s_own_collectives_are_not_compared() -> None:
    rank0 = [forward(1, in_join=True), forward(2, in_join=True), call(30, direct=False), call(40)]
    rank1 = [forward(1, in_join=True), call(25, direct=False), call(25, direct=False), call(40)]
    out = judge("hang.same_collectives", run_of({0: [*rank0, END], 1: [*rank1, END]}))
    assert out.status == "pass"
    assert out.message.startswith("All 2 ranks made the same 1 collectives in the same order")
    assert judge("hang.same_collectives", run_of({0: rank0})).status == "skip"


def iteration(indices: list[int], **kw: Any) -> dict[str, Any]:
    return {
        "kind": "iteration",
        "id": kw.pop("id", 0),
        "steps": 3,
        "indices": indices,
        "count": len(indices),
        "exhausted": True,
        "dataset_len": 10,
        "loader_len": 10,
        "mapped": True,
        **kw,
    }


def test_every_sample_fails_when_data_is_left_out_silently() -> None:
    run = run_of({0: [iteration([0, 2, 4, 6]), END], 1: [iteration([1, 3, 5, 7]), END]})
    out = judge("hang.every_sample", run)
    assert out.status == "fail"
    assert "no rank trained on 2 of the 10 samples (indices 8-9)" in out.message
    assert_translated("hang.every_sample", out)
    dropped = run_of(
        {
            0: [{"kind": "loader_drop_last", "line": 5}, iteration([0, 2, 4, 6]), END],
            1: [iteration([1, 3, 5, 7]), END],
        }
    )
    ok = judge("hang.every_sample", dropped)
    assert ok.status == "pass" and "drop_last=True asked to drop (2 over all epochs)" in ok.message


def test_every_sample_allows_a_sampler_s_padding_and_no_more() -> None:
    padded = run_of({0: [iteration([0, 2, 4, 6, 8]), END], 1: [iteration([1, 3, 5, 7, 9]), END]})
    assert judge("hang.every_sample", padded).status == "pass"
    once_more = {0: [iteration([0, 2, 4, 6, 8, 0]), END], 1: [iteration([1, 3, 5, 7, 9, 1]), END]}
    assert judge("hang.every_sample", run_of(once_more)).status == "fail"
    assert judge("hang.every_sample", run_of({0: [iteration([0, 1])]})).status == "skip"


def test_the_timeout_must_be_given_and_short() -> None:
    def run(**timeout: Any) -> Any:
        event = {"kind": "pg_timeout", "line": 12, **timeout}
        return run_of({0: [event, END], 1: [event, END]}, source=source())

    missing = judge("hang.pg_timeout", run())
    assert missing.status == "fail" and missing.line == 12
    assert "without a timeout" in missing.message
    assert_translated("hang.pg_timeout", missing)
    assert judge("hang.pg_timeout", run(seconds=3600.0)).status == "fail"
    assert judge("hang.pg_timeout", run(given="int")).status == "fail"
    ok = judge("hang.pg_timeout", run(seconds=120.0))
    assert ok.status == "pass" and "a timeout of 120 s at line 12" in ok.message
    assert judge("hang.pg_timeout", run_of({0: [END]})).status == "skip"


def test_samples_handed_out_but_never_trained_on_fail_without_drop_last() -> None:
    def rank(indices: list[int], trained: list[list[str]], *extra: dict[str, Any]) -> list[Any]:
        return [*extra, iteration(indices), {"kind": "consumed", "batches": trained}, END]

    handed = {0: [0, 2, 4, 6, 8], 1: [1, 3, 5, 7, 9]}
    every = {0: [["h0", "h2"], ["h4", "h6"], ["h8"]], 1: [["h1", "h3"], ["h5", "h7"], ["h9"]]}
    ok = run_of({r: rank(handed[r], every[r]) for r in (0, 1)})
    assert judge("hang.every_sample", ok).status == "pass"
    cut = {r: batches[:2] for r, batches in every.items()}  # the loop broke before the last
    out = judge("hang.every_sample", run_of({r: rank(handed[r], cut[r]) for r in (0, 1)}))
    assert out.status == "fail" and "the training steps left out 2 of them" in out.message
    assert_translated("hang.every_sample", out)
    said = {"kind": "loader_drop_last", "line": 3}
    explicit = run_of({r: rank(handed[r], cut[r], said) for r in (0, 1)})
    assert judge("hang.every_sample", explicit).status == "pass"


def own_slice(rank: int, rows: list[list[float]]) -> dict[str, Any]:
    """A pass over a dataset that rank built for itself: indices 0.. on every rank."""
    n = len(rows)
    return iteration(
        list(range(n)),
        dataset=f"t:rank{rank}",
        dataset_len=n,
        loader_len=n,
        mapped=False,
        samples=rows,
    )


def test_per_rank_datasets_are_compared_by_their_samples_not_their_indices() -> None:
    data = [[float(i), float(i * i % 7), float(-i)] for i in range(10)]
    disjoint = run_of({0: [own_slice(0, data[0::2]), END], 1: [own_slice(1, data[1::2]), END]})
    out = judge("hang.every_sample", disjoint)
    assert out.status == "pass", out.message
    overlapping = run_of({0: [own_slice(0, data[0:6]), END], 1: [own_slice(1, data[3:9]), END]})
    out = judge("hang.every_sample", overlapping)
    assert out.status == "fail" and "3 times" in out.message
    assert_translated("hang.every_sample", out)
