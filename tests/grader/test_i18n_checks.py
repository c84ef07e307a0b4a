"""The checkpoint and run checks speak every outcome through grader.i18n.msg: a failing check
rendered in tr or pt-BR keeps no English sentence, and a platform error reads in the viewer's
language. The golden runner's guard against plain English is tested here on a synthetic Result,
and a static scan keeps plain strings out of the converted check modules."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator
from typing import Any

import pytest

import grader.checks
from grader.checks.base import Outcome, RunView, all_checks
from grader.contract import CheckResult, Result
from grader.i18n import localize_check, localize_result, message_fields, msg
from tests.grader.golden import TRANSLATED_CHECKS, untranslated
from tests.grader.test_checks import end, ev, judge, run_of, start

# Words the glossary keeps in English in tr and pt-BR (docs/glossary.md), and words spelt the
# same in English and in the language itself.
KEPT = {"rank", "ranks", "checkpoint", "barrier", "backend", "sandbox", "store", "torchrun"}
SAME_WORD = {"tr": {"model"}, "pt-BR": {"original"}}
_CODE = re.compile(r"`[^`]*`|'[^']*'|\S*[._(=:/]\S*|\b[A-Z0-9_]{2,}\b|\b\w*[a-z][A-Z]\w*\b")


def _param_texts(params: dict[str, Any]) -> Iterator[str]:
    """The plain values a message quotes (file names, the program's own error text): they are
    the same in every language. A nested message's English is translated, so not listed."""
    for value in params.values():
        if isinstance(value, dict) and "id" in value:
            yield from _param_texts(value.get("params") or {})
        elif isinstance(value, str):
            yield value


def english_left(outcome: Outcome, locale: str) -> set[str]:
    """English words of the outcome's message still present once it is rendered in `locale`."""
    message_id, params = message_fields(outcome.message)
    assert message_id is not None, f"plain English: {outcome.message!r}"
    check = {"id": "x.y", "message": str(outcome.message), "message_id": message_id}
    rendered = localize_check({**check, "params": params}, locale)["message"]
    assert rendered != str(outcome.message), f"{message_id} is not translated into {locale}"

    def words(text: str) -> set[str]:
        for quoted in sorted(_param_texts(params), key=len, reverse=True):
            text = text.replace(quoted, " ")
        return {w.lower() for w in re.findall(r"[A-Za-z]{3,}", _CODE.sub(" ", text))} - KEPT

    return (words(str(outcome.message)) & words(rendered)) - SAME_WORD[locale]


def _killed_then_reset() -> RunView:
    dump = 'Fatal Python error: Aborted\n\n  File "/work/main.py", line 42 in main\n'
    aborted = [start(0), ev("fatal", t=5.0, error="Aborted")]
    reset = ev("exception", t=5.1, type="RuntimeError", message="Connection reset by peer")
    others = [[start(r), {**reset, "line": 38}, end("exception")] for r in (1, 2)]
    run = run_of(aborted, *others, exit_codes=[-9, 1, 1], oom_killed=True)
    run.ranks[0].stack = dump
    run.ranks[0].output = "terminate called\n  what():  collective mismatch on 12 vs 4\n"
    return run


def _saved_twice_and_renamed() -> RunView:
    save = ev("save", path="/w/ckpt.pt.77.tmp", ok=True, model_state=True, line=40, seq=5)
    rename = ev("rename", src="/w/ckpt.pt.77.tmp", dst="/w/ckpt.pt", line=41, seq=6)
    own = ev("save", path="/w/ckpt.pt", ok=True, model_state=True, line=40)
    return run_of([start(0), own, end()], [start(1), save, rename, save, end()])


def _compiled_save() -> RunView:
    sd = {"model": True, "compiled_prefixed": 2, "sample": ["_orig_mod.0.weight"]}
    save = ev("save", path="/w/m.pt", ok=True, model_state=True, line=29, state_dicts=[sd])
    return run_of([start(0), save, end()], [start(1), end()])


def _racing_failed_read() -> RunView:
    save = ev("save", path="/w/m.pt", ok=True, model_state=True, sync=5, line=20)
    load = ev("load", path="/w/m.pt", ok=False, sync=5, line=22, error="EOFError()")
    return run_of([start(0), save, end()], [start(1), load, end()])


def _stuck() -> RunView:
    dump = 'Thread 0x1 (most recent call first):\n  File "/work/main.py", line 12 in main\n'
    run = run_of([start(0)], [start(1), end()], exit_codes=[-9, 0], timed_out=True)
    run.ranks[0].stack = dump
    run.wall_seconds = 90.0
    return run


CASES = {
    "ckpt.rank0_only": _saved_twice_and_renamed,
    "ckpt.unwrapped": _compiled_save,
    "ckpt.barrier": _racing_failed_read,
    "run.completed": _killed_then_reset,
    "run.completed/timed out": _stuck,
    "dist.init": lambda: run_of([start(0), end()], [start(1), end()], [start(2), end()]),
    "dist.cleanup": lambda: run_of(
        [start(0), ev("init", rank=0, world_size=2), ev("destroy"), end()],
        [start(1), ev("init", rank=1, world_size=2), end()],
    ),
}


@pytest.mark.parametrize("locale", ["tr", "pt-BR"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_failing_check_keeps_no_english_in_another_language(case: str, locale: str) -> None:
    out = judge(case.split("/")[0], CASES[case]())
    assert out.status == "fail", out
    assert not english_left(out, locale), (out.message, english_left(out, locale))


def test_the_turkish_and_portuguese_sentences_read_as_written() -> None:
    out = judge("run.completed", _killed_then_reset())
    message_id, params = message_fields(out.message)
    check = {"id": "run.completed", "message": str(out.message), "message_id": message_id}
    render = {
        loc: localize_check({**check, "params": params}, loc)["message"] for loc in ("tr", "pt-BR")
    }
    assert str(out.message).startswith("Rank 0 failed first, at line 42 (`line42`): it was killed")
    assert render["tr"].startswith(
        "İlk başarısız olan rank 0 oldu, 42. satırda (`line42`): SIGKILL"
    )
    assert "rank 1 ve 2 tarafında da hata oluştu" in render["tr"]
    assert render["pt-BR"].startswith("O rank 0 falhou primeiro, na linha 42 (`line42`): ele foi")
    assert "Depois, os ranks 1 e 2 também falharam" in render["pt-BR"]  # the verb agrees
    assert "collective mismatch on 12 vs 4" in render["pt-BR"]  # the program's own words stay


def test_a_platform_error_renders_in_the_viewer_s_language() -> None:
    error = msg("platform.crashed", "The grader crashed: {error}", error="KeyError('x')")
    result = Result.platform_error(error).model_dump(mode="json")
    assert result["summary"] == "The grader failed; this does not count."
    assert (result["error_id"], result["error"]) == (
        "platform.crashed",
        "The grader crashed: KeyError('x')",
    )
    turkish = localize_result(result, "tr")
    assert turkish["summary"] == "Değerlendirici hata verdi; bu gönderim sayılmaz."
    assert turkish["error"] == "Değerlendirici çöktü: KeyError('x')"
    plain = Result.platform_error("a stack nobody translates").model_dump(mode="json")
    assert localize_result(plain, "pt-BR")["error"] == "a stack nobody translates"


def test_the_golden_runner_flags_plain_english() -> None:
    translated = msg("ckpt.never_saved", "Rank 0 never saved the model.")
    wrapped = msg("combine.with_ranks", "With {ranks} ranks: {message}", ranks=2, message="Oops.")

    def result(*checks: tuple[str, str]) -> Result:
        summary_id, params = message_fields(
            msg("summary.passed", "All {passed} checks passed", passed=1)
        )
        return Result(
            status="fail",
            summary="s",
            summary_id=summary_id,
            summary_params=params,
            checks=[
                CheckResult(
                    id=cid,
                    status="fail",
                    title="",
                    message=text,
                    message_id=message_fields(text)[0],
                    params=message_fields(text)[1],
                )
                for cid, text in checks
            ],
        )

    assert untranslated(result(("ckpt.rank0_only", translated))) == []
    found = untranslated(
        result(("ckpt.rank0_only", "Rank 0 never saved the model."), ("dist.init", wrapped))
    )
    assert len(found) == 2 and "no message_id" in found[0] and "inside" in found[1]
    assert untranslated(result(("zero.loadable", "plain")), prefixes=("ckpt.",)) == []
    assert untranslated(Result(status="pass", summary="All 1 checks passed")) != []


# The toy exercise's check module (tests/grader/test_toy_exercise.py), in grader/checks only
# while that test runs: a test of adding an exercise, in English on purpose.
TOY = "toy_"


def _outcome_texts(tree: ast.AST) -> Iterator[tuple[int, ast.expr]]:
    """The message argument of every passed/failed/skipped/not_reached/Outcome call and every
    assignment to `<outcome>.message`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            index = 1 if name == "Outcome" else 0
            known = name in ("passed", "failed", "skipped", "not_reached", "Outcome")
            if known and len(node.args) > index:
                yield node.lineno, node.args[index]
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Attribute) and target.attr == "message":
                    yield node.lineno, node.value


def _plain_text(node: ast.expr) -> bool:
    """A literal English text: a string, an f-string, or a sum of texts."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp):
        return _plain_text(node.left) or _plain_text(node.right)
    if isinstance(node, ast.IfExp):
        return _plain_text(node.body) or _plain_text(node.orelse)
    return False


def test_every_check_module_passes_no_literal_english_as_a_message() -> None:
    """Every module of grader.checks (base and modules that only re-register a check included),
    and every module a check is registered from."""
    names = {
        f"grader.checks.{info.name}"
        for info in pkgutil.iter_modules(grader.checks.__path__)
        if not info.name.startswith(TOY)
    }
    registered = {inspect.getmodule(definition.fn) for definition in all_checks().values()}
    modules = {importlib.import_module(name) for name in names} | {
        m for m in registered if m and not m.__name__.startswith(f"grader.checks.{TOY}")
    }
    assert {"grader.checks.base", "grader.checks.run", "grader.checks.elastic"} <= {
        m.__name__ for m in modules
    }
    # ... and the golden runner holds every check to a translated message.
    assert all(c.startswith(TRANSLATED_CHECKS) for c in all_checks() if not c.startswith(TOY))
    for module in modules:
        tree = ast.parse(inspect.getsource(module))
        plain = [line for line, arg in _outcome_texts(tree) if _plain_text(arg)]
        assert not plain, f"{module.__name__}: literal English at lines {plain}"
