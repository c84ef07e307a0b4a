"""The SyncBatchNorm checks (`syncbn.*`) on synthetic traces (no processes started)."""

from __future__ import annotations

from typing import Any

import pytest

from grader.checks.base import RankView, RunView, get_check
from grader.events import SyncbnConvert
from grader.i18n import catalog, localize_check
from tests.grader.translated import english_left, rendered

SOURCE = "\n".join(f"line{i}" for i in range(1, 100))


def run_of(*ranks: list[dict[str, Any]], device: str = "cpu") -> RunView:
    views = [
        RankView(rank=r, exit_code=0, events=[{"seq": i, **e} for i, e in enumerate(events)])
        for r, events in enumerate(ranks)
    ]
    return RunView(world_size=len(views), device=device, ranks=views, source=SOURCE)


def judge(check_id: str, run: RunView) -> Any:
    definition = get_check(check_id)
    assert definition is not None
    return definition.fn(run, {})


def wrap(line: int, n_plain: int, n_synced: int) -> dict[str, Any]:
    plain = [f"head.{i} (BatchNorm1d)" for i in range(n_plain)]
    return {
        "kind": "ddp_batchnorm",
        "line": line,
        "plain": plain,
        "n_plain": n_plain,
        "n_synced": n_synced,
    }


def test_a_conversion_record_without_inside_ddp_counts_as_a_late_one() -> None:
    convert = {"kind": "syncbn_convert", "line": 45}  # an older harness's record
    (parsed,) = RankView(rank=0, exit_code=0, events=[convert]).typed(SyncbnConvert)
    assert parsed.inside_ddp and not parsed.is_ddp and parsed.n_plain == 0
    run = run_of([wrap(40, 1, 0), convert], [wrap(40, 1, 0), convert])
    out = judge("syncbn.before_wrap", run)
    assert (
        out.status == "fail"
        and out.line == 45
        and "after the model had been wrapped" in out.message
    )
    assert judge("syncbn.converted", run).status == "pass"


@pytest.mark.parametrize("locale", ["tr", "pt-BR"])
def test_a_second_model_with_plain_layers_is_named_in_the_viewer_s_language(locale: str) -> None:
    ranks = [[wrap(40, 0, 2), wrap(50, 2, 0)] for _ in range(2)]
    out = judge("syncbn.converted", run_of(*ranks))
    assert out.status == "fail" and out.line == 50
    assert out.message.startswith("The 2nd model wrapped in DDP at line 50")
    assert "2 plain BatchNorm layers: head.0 (BatchNorm1d), head.1 (BatchNorm1d)" in out.message
    text = rendered("syncbn.converted", out, locale)
    assert not english_left(text), text
    assert "head.1 (BatchNorm1d)" in text and "convert_sync_batchnorm(model)" in text
    mixed = judge("syncbn.before_wrap", run_of([wrap(40, 1, 1)], [wrap(40, 1, 1)]))
    assert "it had 1 SyncBatchNorm layer and 1 plain BatchNorm layer" in mixed.message
    assert not english_left(rendered("syncbn.before_wrap", mixed, locale))


@pytest.mark.parametrize("locale", ["tr", "pt-BR"])
def test_differing_statistics_leave_no_english(locale: str) -> None:
    def stats(digest: str, total: float) -> dict[str, Any]:
        return {
            "kind": "bn_stats",
            "layer": "bn",
            "mean": digest,
            "var": "v",
            "mean_sum": total,
            "var_sum": 1.0,
        }

    out = judge("syncbn.stats_synced", run_of([stats("a", 0.5)], [stats("b", 0.9)], device="cuda"))
    assert out.status == "fail" and "layer bn's running_mean" in out.message
    text = rendered("syncbn.stats_synced", out, locale)
    assert not english_left(text) and "running_mean" in text and "0.9" in text, text
    cpu = judge("syncbn.stats_synced", run_of([], []))
    assert cpu.status == "skip" and not english_left(rendered("syncbn.stats_synced", cpu, locale))


@pytest.mark.parametrize("check_id", ["syncbn.converted", "syncbn.before_wrap"])
def test_no_ddp_model_gets_the_wrapping_hint_in_every_language(check_id: str) -> None:
    outcome = judge(check_id, run_of([{"kind": "start"}], [{"kind": "start"}]))
    assert outcome.status == "fail" and outcome.hint_of == "ddp.wrapped"
    wrapping = get_check("ddp.wrapped")
    assert wrapping is not None
    check = {"id": check_id, "status": "fail", "title": "", "message": "m"}
    check.update(hint=wrapping.hint, hint_of="ddp.wrapped")
    assert localize_check(check, "tr")["hint"] == catalog("tr")["hint.ddp.wrapped"]
    assert localize_check(check, "pt-BR")["hint"] == catalog("pt-BR")["hint.ddp.wrapped"]
    # The exercise's own hint for the wrap wins, as for any hint.
    own = {"ddp.wrapped": {"en": "Wrap it.", "tr": "Sarmalayın."}}
    assert localize_check(check, "tr", own)["hint"] == "Sarmalayın."
