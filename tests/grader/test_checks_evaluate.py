"""The distributed-evaluation checks (`eval.*`) on synthetic traces (no processes started)."""

from __future__ import annotations

from typing import Any

import pytest

from grader.checks.base import RankView, RunView, get_check
from grader.checks.evaluate import reports
from grader.events import EvalRows
from grader.i18n import TRANSLATED_LOCALES
from tests.grader.translated import english_left, rendered

END = {"kind": "end", "status": "ok", "exit_code": 0}


def run_of(rows: list[list[str]], outputs: list[str] | None = None) -> RunView:
    outputs = outputs or [""] * len(rows)
    views = [
        RankView(
            rank=i, exit_code=0, output=outputs[i], events=[{"kind": "eval_rows", "rows": r}, END]
        )
        for i, r in enumerate(rows)
    ]
    return RunView(world_size=len(rows), device="cpu", ranks=views)


def judge(check_id: str, run: RunView) -> Any:
    definition = get_check(check_id)
    assert definition is not None
    return definition.fn(run, {"metric": "accuracy"})


def samples(indices: range | list[int]) -> list[str]:
    return [f"s{i}" for i in indices]


def with_reference(run: RunView, reference: RunView) -> RunView:
    run.siblings = [reference]
    return run


def test_reports_reads_only_whole_metric_lines() -> None:
    assert reports(
        "epoch 1\naccuracy=0.5\nrank 1: accuracy=0.4\n accuracy=0.25 \n", "accuracy"
    ) == [
        "0.5",
        "0.25",
    ]


def test_shards_allow_the_padding_but_not_a_whole_dataset_per_rank() -> None:
    whole = run_of([samples(range(7))])
    padded = with_reference(run_of([samples([0, 2, 4, 6]), samples([1, 3, 5, 0])]), whole)
    out = judge("eval.shards", padded)
    assert out.status == "pass" and "1 repeated as padding" in out.message
    everything = run_of([samples(range(7)), samples(range(7))])
    out = judge("eval.shards", everything)
    assert out.status == "fail" and "7 of them more than once" in out.message
    dropped = with_reference(run_of([samples([0, 2]), samples([1, 3])]), whole)
    out = judge("eval.shards", dropped)
    assert out.status == "fail" and "3 of the 7 samples" in out.message
    idle = run_of([samples(range(7)), []])
    assert judge("eval.shards", idle).rank == 1


def test_rank0_reports_once_and_alone() -> None:
    assert judge("eval.rank0_reports", run_of([[], []], ["accuracy=0.5\n", "done\n"])).status == (
        "pass"
    )
    out = judge("eval.rank0_reports", run_of([[], []], ["accuracy=0.5\n", "accuracy=0.5\n"]))
    assert out.status == "fail" and out.rank == 1
    out = judge("eval.rank0_reports", run_of([[], []], ["accuracy=0.5\naccuracy=0.5\n", ""]))
    assert out.status == "fail" and "2 lines" in out.message


def test_metric_must_equal_the_one_process_value_exactly() -> None:
    reference = run_of([[]], ["accuracy=0.8021978021978022\n"])
    same = with_reference(run_of([[], []], ["accuracy=0.8021978021978022\n", ""]), reference)
    assert judge("eval.metric_exact", same).status == "pass"
    close = with_reference(run_of([[], []], ["accuracy=0.802183632734531\n", ""]), reference)
    out = judge("eval.metric_exact", close)
    assert out.status == "fail" and "accuracy=0.8021978021978022" in out.message
    alone = run_of([[], []], ["accuracy=0.5\n", ""])
    assert judge("eval.metric_exact", alone).status == "skip"
    assert judge("eval.metric_exact", reference).status == "pass"


def test_the_rows_read_typed_and_a_record_without_rows_evaluated_nothing() -> None:
    view = RankView(rank=0, exit_code=0, events=[{"kind": "eval_rows", "forwards": 2}])
    (rows,) = view.typed(EvalRows)
    assert rows.rows == [] and rows.forwards == 2 and rows.line is None


@pytest.mark.parametrize("locale", TRANSLATED_LOCALES)
def test_failing_evaluations_read_whole_in_the_viewer_s_language(locale: str) -> None:
    whole = run_of([samples(range(7))])
    idle = run_of([[], [], samples(range(7))])
    everything = run_of([samples(range(7)), samples(range(7))])
    dropped = with_reference(run_of([samples([0, 2]), samples([1, 3])]), whole)
    printed = run_of([[], [], []], ["accuracy=0.5\n", "accuracy=0.5\n", "accuracy=0.5\n"])
    reference = run_of([[]], ["accuracy=0.8\n"])
    differs = with_reference(run_of([[], []], ["accuracy=0.75\n", ""]), reference)
    cases = [
        ("eval.shards", idle, "Ranks 0 and 1 evaluated no samples"),
        ("eval.shards", everything, "7 of them more than once"),
        ("eval.shards", dropped, "3 of the 7 samples"),
        ("eval.rank0_reports", printed, "Ranks 1 and 2 also printed"),
        ("eval.metric_exact", differs, "reports accuracy=0.8"),
    ]
    for check_id, run, english in cases:
        out = judge(check_id, run)
        assert out.status == "fail" and english in out.message
        text = rendered(check_id, out, locale)
        assert not english_left(text), text
