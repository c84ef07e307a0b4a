"""The DDP, data and process-group events typed end to end (hook record -> trace line -> typed
read), and the ddp checks' messages in Turkish and Portuguese with no English left in them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from torch.utils.data import BatchSampler, DistributedSampler

from grader.checks.base import Outcome, RankView, RunView
from grader.events import CollectiveCall, DdpInit, Iteration
from grader.harness.hooks.data import _sampler_info
from grader.harness.hooks.dist import call_record
from grader.harness.tracer import Tracer
from grader.i18n import localize_check, message_fields
from grader.inside.ranklogs import read_traces
from grader.launch.wire import HarnessSettings
from tests.grader.test_checks import end, ev, judge, run_of, start
from tests.grader.test_verdict_classes import replay_run, with_sibling

# --- Typed records ---------------------------------------------------------------------------


def test_a_recorded_event_reads_back_typed_from_the_trace_file(tmp_path: Path) -> None:
    tracer = Tracer(
        tmp_path,
        rank=1,
        local_rank=1,
        world_size=2,
        attempt=0,
        learner_file="/w/main.py",
        settings=HarnessSettings(),
    )
    tracer.sync = 3
    call = call_record("all_reduce", (object(),), {"op": "ReduceOp.AVG"}, i=1, line=12, step=0)
    tracer.record(call)
    tracer.record(DdpInit(index=0, line=9, module="Net", params=10, devices=["cpu"]))
    view = RankView(rank=1, exit_code=0, events=read_traces(tmp_path)[1])
    [read] = view.typed(CollectiveCall)
    assert (read.op, read.redop, read.line, read.sync, read.src) == (
        "all_reduce",
        "AVG",
        12,
        3,
        None,
    )
    [init] = view.typed(DdpInit)
    assert (init.module, init.params, init.devices, init.shapes) == ("Net", 10, ["cpu"], None)


def test_a_record_lacking_fields_takes_what_their_absence_meant() -> None:
    it = Iteration.parse({"kind": "iteration", "indices": [3, 1], "count": 2, "steps": 1})
    assert not it.exhausted and not it.distributed and not it.shuffle
    assert (it.samples, it.dataset, it.seed, it.attempt) == ([], None, None, 0)
    assert DdpInit.parse({"kind": "ddp_init"}).devices == []


def test_the_data_hook_s_sampler_description_fits_the_iteration_event() -> None:
    dataset = list(range(10))
    sampler = DistributedSampler(dataset, num_replicas=2, rank=1, shuffle=True, seed=7)
    batches = BatchSampler(sampler, batch_size=4, drop_last=False)
    for info in (_sampler_info(sampler), _sampler_info(batches)):
        it = Iteration(id=0, line=5, indices=[1, 3], count=2, **info)
        assert (it.distributed, it.num_replicas, it.sampler_rank, it.seed) == (True, 2, 1, 7)
    assert Iteration(**_sampler_info(batches)).batch_sampler == "BatchSampler"
    assert Iteration(**_sampler_info(list(range(3)))).distributed is False


# --- Messages in tr and pt-BR ------------------------------------------------------------------

# Words the translations keep in English (docs/glossary.md: PyTorch names and terms kept as is).
KEPT = {"rank", "ranks", "world", "size", "ddp", "backward", "forward", "loss", "batch", "closure"}
KEPT |= {"optimizer", "all", "reduce", "distributeddataparallel", "line", "search", "strong"}
KEPT |= {"wolfe", "adam", "sgd", "net", "parameters", "model", "cross", "entropy", "e"}


def _words(text: str) -> list[str]:
    # Code, quoted names and identifiers are not prose.
    text = re.sub(r"`[^`]*`|'[\w.]+'|\w+\([^)]*\)|\w*_\w*", " ", text)
    return re.findall(r"[a-z]+", text.lower())


def english_left(english: str, translated: str) -> set[tuple[str, ...]]:
    """Runs of three English words (none of them a kept term) that the translation still has."""

    def runs(text: str) -> set[tuple[str, ...]]:
        words = _words(text)
        return {tuple(words[i : i + 3]) for i in range(len(words) - 2)}

    return {run for run in runs(english) & runs(translated) if not set(run) & KEPT}


def test_english_left_finds_a_glued_english_fragment() -> None:
    english = "Rank 1 multiplied its loss by 0.5 (= 1/2, one over the world size)."
    glued = "Rank 1 kaybını 0.5 (= 1/2, one over the world size) ile çarptı."
    assert english_left(english, glued) == {("one", "over", "the")}
    assert not english_left(english, "Rank 1 kaybını 0.5 (= 1/2, bir bölü world size) ile çarptı.")


def _steps(rank: int, digest: str, sums: list[float]) -> list[dict[str, Any]]:
    return [start(rank), ev("step", opt=0, n=1, digest=digest, sums=sums, line=40), end()]


def _ok(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [*events, end()]


def _grad(world: int, **replay: Any) -> RunView:
    run = replay_run(world, 1, 1.0)
    record = next(e for e in run.ranks[0].events if e["kind"] == "replay")
    record.update(replay)
    return run


def ddp_outcomes() -> dict[str, tuple[str, Outcome]]:
    ddp = ev("ddp_init", module="Net", params=10, line=9)
    fwd = ev("ddp_forward", steps=0, line=20)
    late_fwd = ev("ddp_forward", steps=1, line=20)
    step = ev("step", opt=0, n=1, ddp_frac=1.0, line=30, digest="a", sums=[1.0])
    adam = ev("step", opt=1, n=1, ddp_frac=0.0, line=31, optimizer="Adam")
    bare = ev("step", opt=0, n=1, ddp_frac=0.5, line=30)
    closure = [
        ev("closure_loss", call=1, loss=x, line_search="strong_wolfe", line=33) for x in (1, 2)
    ]
    micro = with_sibling(replay_run(2, 2, 0.25), replay_run(1, 4, 0.25))
    cases = {
        "ddp.never_wrapped": ("ddp.wrapped", run_of(_ok([ddp]), _ok([]), _ok([]))),
        "ddp.never_wrapped_one": ("ddp.wrapped", run_of(_ok([ddp]), _ok([]))),
        "ddp.reached_wrapped": ("ddp.wrapped", run_of([start(0)], [start(1)])),
        "ddp.optimizer_not_ddp": ("ddp.wrapped", run_of(_ok([ddp, fwd, bare]))),
        "ddp.nth_optimizer_not_ddp": ("ddp.wrapped", run_of(_ok([ddp, fwd, step, adam]))),
        "ddp.no_ddp_forward": ("ddp.wrapped", run_of(_ok([ddp, late_fwd, step]))),
        "ddp.never_trained": ("ddp.wrapped", run_of(_ok([ddp]), _ok([ddp]))),
        "ddp.wrapped_ok": ("ddp.wrapped", run_of(_ok([ddp, fwd, step]), _ok([ddp, fwd, step]))),
        "ddp.params_differ": ("ddp.in_sync", run_of(_steps(0, "a", [1.0]), _steps(1, "b", [2.0]))),
        "ddp.param_list": ("ddp.in_sync", run_of(_steps(0, "a", [1.0]), _steps(1, "b", []))),
        "ddp.params_differ_squares": (
            "ddp.in_sync",
            run_of(
                [start(0), ev("step", opt=0, n=1, digest="a", sums=[1.0], squares=[2.0]), end()],
                [start(1), ev("step", opt=0, n=1, digest="b", sums=[1.0], squares=[3.0]), end()],
            ),
        ),
        "ddp.closure_losses_differ": (
            "ddp.in_sync",
            run_of(_ok([closure[0], step]), _ok([closure[1], step])),
        ),
        "ddp.nothing_to_compare": ("ddp.in_sync", run_of(_ok([]), _ok([]))),
        "ddp.no_model": ("ddp.grad_average", run_of(_ok([]), _ok([]))),
        "ddp.reached_replay": ("ddp.grad_average", run_of([start(0), ddp], [start(1), ddp])),
        "ddp.no_replay": ("ddp.grad_average", run_of(_ok([ddp]), _ok([ddp]))),
        "ddp.zero_gradient_not_judged": (
            "ddp.grad_average",
            _grad(2, status="zero_gradient", norm_actual=0),
        ),
        "ddp.why_summed": ("ddp.grad_average", _grad(2, rel_error=0.5, ratio=2.0)),
        "ddp.why_divided_again": ("ddp.grad_average", _grad(2, rel_error=0.5, ratio=0.5)),
        "ddp.why_not_averaged": (
            "ddp.grad_average",
            _grad(2, rel_error=0.3, ratio=1.3, worst_param="fc.weight"),
        ),
        "ddp.why_summed_again": ("ddp.grad_average", _grad(2, step_ratio=2.0)),
        "ddp.why_enlarged": ("ddp.grad_average", _grad(2, step_ratio=1.5)),
        "ddp.divided_after_backward": ("ddp.grad_average", _grad(2, step_ratio=0.5)),
        "ddp.scale_one": ("ddp.grad_average", replay_run(2, 1, 0.5)),
        "ddp.scale_micro_steps": ("ddp.grad_average", micro),
        "ddp.averaged": ("ddp.grad_average", replay_run(2, 1, 1.0)),
    }
    return {name: (check_id, judge(check_id, run)) for name, (check_id, run) in cases.items()}


def _ids(message: str) -> set[str]:
    """The message id of a text and of every message nested in its parameters."""
    message_id, params = message_fields(message)
    found = {message_id} if message_id else set()
    stack = list(params.values())
    while stack:
        value = stack.pop()
        if isinstance(value, dict) and "id" in value:
            found.add(value["id"])
            stack.extend((value.get("params") or {}).values())
    return found


OUTCOMES = ddp_outcomes()


@pytest.mark.parametrize("name", sorted(OUTCOMES))
@pytest.mark.parametrize("locale", ["tr", "pt-BR"])
def test_a_ddp_message_renders_with_no_english_left(name: str, locale: str) -> None:
    check_id, outcome = OUTCOMES[name]
    assert name in _ids(outcome.message), (name, str(outcome.message))
    message_id, params = message_fields(outcome.message)
    check = {"id": check_id, "title": "", "message": str(outcome.message)}
    rendered = localize_check({**check, "message_id": message_id, "params": params}, locale)
    translated = rendered["message"]
    assert translated != str(outcome.message) and "{" not in translated
    assert not english_left(str(outcome.message), translated), translated


def test_the_english_text_is_unchanged_where_learners_and_cases_read_it() -> None:
    scaled = OUTCOMES["ddp.scale_one"][1]
    assert scaled.message.startswith("Rank 0 multiplied its loss by 0.5 (= 1/2, one over the")
    assert OUTCOMES["ddp.never_wrapped"][1].message.startswith("Ranks 1 and 2 never wrapped")
    assert (
        "off by 30% (largest difference in 'fc.weight')"
        in OUTCOMES["ddp.why_not_averaged"][1].message
    )
    message_id, params = message_fields(scaled.message)
    check = {"id": "ddp.grad_average", "message": str(scaled.message), "message_id": message_id}
    turkish = localize_check({**check, "params": params}, "tr")["message"]
    assert "43. satırda" in turkish and "1/2, bir bölü world size" in turkish


def _sequence(rank: int, digests: str) -> list[dict[str, Any]]:
    steps = [
        ev("step", opt=0, n=n, digest=d, sums=[float(ord(d))], line=40)
        for n, d in enumerate(digests, start=1)
    ]
    return [start(rank), *steps, end()]


def test_in_sync_matches_a_rank_that_joined_early_to_the_others_steps_in_order() -> None:
    # Under Join, rank 1 ran out of batches after step 3 of epoch 1: rank 0 took step "d" alone,
    # DDP then copied its weights to rank 1, and both went on with "e" and "f".
    joined = judge("ddp.in_sync", run_of(_sequence(0, "abcdef"), _sequence(1, "abcef")))
    assert joined.status == "pass", joined.message
    # With a stateful optimizer the joined rank's next step differs: caught, at its step 4.
    drifted = judge("ddp.in_sync", run_of(_sequence(0, "abcdef"), _sequence(1, "abcxf")))
    assert drifted.status == "fail" and "After optimizer step 4, rank 1" in drifted.message
    # Equal step counts are still compared step by step: a reordering is no match.
    swapped = judge("ddp.in_sync", run_of(_sequence(0, "abdc"), _sequence(1, "abcd")))
    assert swapped.status == "fail" and "After optimizer step 3" in swapped.message
