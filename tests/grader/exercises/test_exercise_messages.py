"""The allreduce-by-hand, elastic-resume and env-launch checks in the viewer's language, and their
trace records read typed (`grader.events`), on hand-made traces (no sandbox)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from grader.checks.base import Outcome
from grader.events import Event, HandGrads, LaunchEnv, Weights
from grader.harness.hooks.launch import LAUNCH_VARS
from grader.i18n import TRANSLATED_LOCALES, localize_check, message_fields
from tests.grader.exercises.test_exercise_checks import attempt, coll, grads, judge, run_of

# Words of the English templates that neither translation uses as a word of its own.
ENGLISH = re.compile(
    r"\b(the|and|of|was|were|with|after|before|line|called|saved|every|only|not|took|loaded)\b",
    re.IGNORECASE,
)


def rendered(check_id: str, out: Outcome, locale: str) -> str:
    message_id, params = message_fields(out.message)
    assert message_id is not None, out.message
    check = {"id": check_id, "status": out.status, "title": "", "message": str(out.message)}
    return str(
        localize_check({**check, "message_id": message_id, "params": params}, locale)["message"]
    )


def assert_translated(check_id: str, out: Outcome, *expected: str) -> dict[str, str]:
    """The message in every translated locale: no English word left, each `expected` in one."""
    texts = {locale: rendered(check_id, out, locale) for locale in TRANSLATED_LOCALES}
    for locale, text in texts.items():
        assert text != str(out.message)
        assert not ENGLISH.findall(text), f"{locale}: {text}"
    for part in expected:
        assert any(part in text for text in texts.values()), (part, texts)
    return texts


def source(n: int = 60) -> str:
    return "\n".join(f"x{i} = {i}" for i in range(1, n))


def test_a_sum_not_divided_reads_in_turkish_and_portuguese_with_its_reason() -> None:
    l0, l1 = [[1.0, 2.0], [3.0]], [[3.0, 4.0], [5.0]]
    summed = [[4.0, 6.0], [8.0]]
    run = run_of({0: [coll(), grads(l0, summed)], 1: [coll(), grads(l1, summed)]}, source=source())
    out = judge("allreduce.grad_average", run)
    assert out.status == "fail" and "summed over the 2 ranks but not divided" in out.message
    texts = assert_translated("allreduce.grad_average", out)
    assert "ortalamanın 2 katı: gradyanlar 2 rank üzerinden toplandı" in texts["tr"]
    assert "20. satırda (`x20 = 20`)" in texts["tr"]
    assert "2x a média: os gradientes foram somados nos 2 ranks" in texts["pt-BR"]


def test_a_collective_without_partner_and_a_pass_are_translated() -> None:
    run = run_of({0: [coll(20), coll(20)], 1: [coll(20)]}, timed_out=True, source=source())
    out = judge("allreduce.collectives_match", run)
    texts = assert_translated("allreduce.collectives_match", out)
    assert (
        "2 kolektif işlem çağrısı" in texts["tr"]
        and "até a execução ser interrompida" in (texts["pt-BR"])
    )
    ok = judge("allreduce.collectives_match", run_of({0: [coll()], 1: [coll()]}))
    assert ok.status == "pass" and ok.message == "All 2 ranks made the same 1 collective call."
    assert "(1 chamada coletiva)" in rendered("allreduce.collectives_match", ok, "pt-BR")


def launch_run(*extra: dict[str, Any], **kw: Any) -> Any:
    env = {"kind": "launch_env", "rank": "0", "local_rank": "0", "world_size": "2"}
    return run_of(
        {
            r: [
                env,
                *extra,
                {"kind": "init", "rank": r, "world_size": 2},
                {"kind": "end", "status": "ok"},
            ]
            for r in range(2)
        },
        source=source(),
        **kw,
    )


def test_a_tcp_init_method_is_named_in_every_language() -> None:
    init_args = {"kind": "init_args", "init_method": "tcp://127.0.0.1:29512", "line": 12}
    out = judge("launch.env", launch_run(init_args))
    assert out.status == "fail" and "init_method='tcp://127.0.0.1:29512'" in out.message
    texts = assert_translated("launch.env", out, "init_method='tcp://127.0.0.1:29512'")
    assert texts["tr"].startswith("Rank 0, 12. satırda")


def test_an_overridden_master_port_and_the_world_size_phrase_are_translated() -> None:
    write = {
        "kind": "env_write",
        "key": "MASTER_PORT",
        "value": "29500",
        "launched": "41000",
        "line": 7,
    }
    out = judge("launch.env", launch_run(write, nnodes=2))
    assert "set MASTER_PORT to '29500'" in out.message
    assert "(at world size 2 on 2 nodes)" in out.message
    texts = assert_translated("launch.env", out)
    assert "(2 düğümde world size 2 ile)" in texts["tr"]
    assert "(com world size 2 em 2 nós)" in texts["pt-BR"]


def test_every_process_saving_is_reported_in_portuguese_with_the_ranks() -> None:
    save = {"kind": "save", "path": "/w/weights.pt", "ok": True, "model_state": True, "line": 29}
    run = run_of({0: [save], 1: [save]}, source=source())
    out = judge("launch.multinode", run)
    texts = assert_translated("launch.multinode", out, "weights.pt")
    assert texts["pt-BR"].startswith("Já em um só nó, os ranks 0 e 1 salvaram cada um weights.pt")
    assert judge("launch.multinode", run_of({0: [save], 1: []})).status == "skip"


def elastic_run(loads_on: tuple[int, ...]) -> Any:
    fault = attempt("fault", 0, rank=1, after_steps=2, placed="snapshot", snapshot_step=1)
    events: dict[int, list[dict[str, Any]]] = {}
    for r in (0, 1):
        first = [attempt("step", 0, opt=0), attempt("save", 0, path="/w/snap.pt", ok=True, line=40)]
        again = [attempt("start", 1)]
        if r in loads_on:
            again.append(attempt("load", 1, path="/w/snap.pt", ok=True, line=12))
        again += [attempt("step", 1, opt=0), attempt("end", 1, status="ok")]
        events[r] = [attempt("start", 0), *first, *([fault] if r == 1 else []), *again]
    return run_of(events, source=source())


@pytest.mark.parametrize(("loads_on", "verb"), [((0,), "não carregou"), ((), "não carregaram")])
def test_a_rank_that_did_not_load_the_snapshot_agrees_in_number(
    loads_on: tuple[int, ...], verb: str
) -> None:
    out = judge("elastic.resumed", elastic_run(loads_on))
    assert out.status == "fail" and "did not load the snapshot (snap.pt)" in out.message
    texts = assert_translated("elastic.resumed", out, "snap.pt")
    assert verb in texts["pt-BR"]


def test_a_resume_passes_in_turkish_with_the_stop_and_the_steps() -> None:
    out = judge("elastic.resumed", elastic_run((0, 1)))
    assert out.status == "pass"
    assert out.message == (
        "Rank 1 was stopped after its optimizer step 2; after the restart every rank loaded the "
        "snapshot at line 12 (`x12 = 12`) and continued with 1 more optimizer step."
    )
    texts = assert_translated("elastic.resumed", out)
    assert texts["tr"].startswith("Rank 1, 2. optimizer adımından sonra durduruldu; ")
    assert texts["tr"].endswith("devam edip 1 optimizer adımı daha attı.")


def test_completed_after_a_restart_translates_the_whole_sentence() -> None:
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
    assert out.message.endswith(" in attempt 2, after torchrun restarted the ranks once.")
    assert message_fields(out.message)[0] == "elastic.completed_in_attempt"
    tr = rendered("run.completed", out, "tr")
    assert tr.startswith("torchrun rank'leri bir kez yeniden başlattıktan sonra, 2. denemede: ")
    assert "Na tentativa 2, depois que o torchrun reiniciou os ranks uma vez: " in rendered(
        "run.completed", out, "pt-BR"
    )


def test_hand_grads_read_typed_with_the_defaults_of_a_missing_field() -> None:
    raw = {"kind": "hand_grads", "seq": 4, "attempt": 0, "names": ["w"], "local": [[1.0]]}
    record = HandGrads.parse(raw)
    assert record.names == ["w"] and record.local == [[1.0]] and record.used == []
    assert record.n_losses == 1 and record.world_scaled is False and record.line is None
    run = run_of({0: [raw, {"kind": "weights", "i": 1, "digest": "d", "sum": 2.5}]})
    ((rank, typed),) = run.typed(HandGrads)
    assert rank == 0 and typed == record
    assert run.ranks[0].typed(Weights) == [Weights(seq=1, i=1, digest="d", sum=2.5)]


def test_the_launch_env_record_names_every_variable_the_hook_reads() -> None:
    common = {f.name for f in dataclasses.fields(Event)}
    own = {f.name for f in dataclasses.fields(LaunchEnv)} - common
    assert own == {name.lower() for name in LAUNCH_VARS}
    record = LaunchEnv(rank="1", group_rank="0")
    assert LaunchEnv.parse({"kind": "launch_env", **record.data()}) == record


def test_a_failure_after_a_restart_keeps_the_id_of_a_reason_that_opens_with_a_parameter() -> None:
    """run.completed's "{failure} Then {ranks} failed too.", lower-cased after a colon: the
    change falls inside the `failure` parameter, which is edited, so every part stays translated."""

    def crash(rank: int) -> list[dict[str, Any]]:
        raised = attempt("exception", 1, type="ValueError", message="boom", line=7, t=float(rank))
        return [attempt("start", 1), raised, attempt("end", 1, status="exception")]

    faulted = {
        0: [attempt("start", 0), *crash(0)],
        1: [attempt("start", 0), attempt("fault", 0, rank=1, after_steps=3), *crash(1)],
    }
    out = judge("run.completed", run_of(faulted))
    assert out.status == "fail"
    assert out.message == (
        "In attempt 2, after torchrun restarted the ranks once: rank 0 failed first, at line 7: "
        "ValueError: boom. Then rank 1 failed too (usually a consequence: their peer was gone)."
    )
    message_id, params = message_fields(out.message)
    assert message_id == "elastic.failed_in_attempt"
    assert params["reason"]["id"] == "run.then_failed"
    assert params["reason"]["params"]["failure"]["en"].startswith("rank 0 failed first")
    assert_translated("run.completed", out, "ValueError: boom")
