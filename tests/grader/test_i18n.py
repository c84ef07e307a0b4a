"""Grader texts in tr and pt-BR: every message id the grader can emit has a translation with the
same placeholders, and a Result renders in the viewer's language from its ids and parameters."""

from __future__ import annotations

import ast
import string
from collections.abc import Iterator
from pathlib import Path

import pytest

import grader.i18n as i18n
from grader.checks.base import all_checks
from grader.contract import CheckResult, Result
from grader.i18n import catalog, localize_result, message_fields, msg

GRADER = Path(i18n.__file__).parent
# The app writes platform errors as grader messages too (app/submissions/jobs.py).
SOURCES = (GRADER, GRADER.parent / "app")
TRANSLATED = [locale for locale in i18n.LOCALES if locale != "en"]


def emitted_messages() -> Iterator[tuple[str, str, str]]:
    """(message id, English template, file:line) of every msg(...) call in grader/ and app/."""
    for path in sorted(path for root in SOURCES for path in root.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "msg"):
                continue
            if len(node.args) < 2 or not isinstance(node.args[0], ast.Constant):
                continue
            template = node.args[1]
            if isinstance(template, ast.Constant):
                english = str(template.value)
            else:
                assert isinstance(template, ast.Name), f"{path}:{node.lineno}"
                english = getattr(i18n, template.id)
            yield str(node.args[0].value), english, f"{path.name}:{node.lineno}"


def english_catalog() -> dict[str, str]:
    texts = {message_id: english for message_id, english, _ in emitted_messages()}
    for check_id, definition in all_checks().items():
        texts[f"title.{check_id}"] = definition.title
        texts[f"hint.{check_id}"] = definition.hint
    return texts


def placeholders(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def test_message_ids_are_unique_per_template() -> None:
    seen: dict[str, str] = {}
    for message_id, english, where in emitted_messages():
        assert seen.setdefault(message_id, english) == english, f"{where}: {message_id} reused"


@pytest.mark.parametrize("locale", TRANSLATED)
def test_every_grader_text_has_a_translation(locale: str) -> None:
    english = english_catalog()
    translated = catalog(locale)
    missing = sorted(set(english) - set(translated))
    assert not missing, f"grader/locales/{locale}/ lacks {missing}"
    unused = sorted(set(translated) - set(english))
    assert not unused, f"grader/locales/{locale}/ has entries nothing emits: {unused}"
    for message_id, template in english.items():
        assert placeholders(translated[message_id]) == placeholders(template), message_id


def test_a_result_renders_in_the_viewer_s_language() -> None:
    inner = msg(
        "run.job_timeout", i18n.WITH_ONE_RANK.replace("{message}", "x") + "{seconds:g}", seconds=3.0
    )
    assert str(inner).endswith("3")
    message = msg("combine.with_ranks", i18n.WITH_RANKS, ranks=2, message=msg("run.job_oom", "oom"))
    message_id, params = message_fields(message)
    check = CheckResult(
        id="dist.init",
        status="fail",
        title=all_checks()["dist.init"].title,
        message=message,
        hint=all_checks()["dist.init"].hint,
        message_id=message_id,
        params=params,
    )
    summary = msg("summary.failed", i18n.SUMMARY_FAILED, failed=1, total=4)
    summary_id, summary_params = message_fields(summary)
    result = Result(
        status="fail",
        summary=summary,
        summary_id=summary_id,
        summary_params=summary_params,
        checks=[check],
    ).model_dump(mode="json")
    assert result["summary"] == "1 of 4 checks failed"
    assert result["checks"][0]["message"] == "With 2 ranks: oom"
    turkish = localize_result(result, "tr")
    assert turkish["summary"] == "4 kontrolden 1 tanesi kaldı"
    assert turkish["checks"][0]["title"] == "Her rank süreç grubuna katılıyor"
    assert turkish["checks"][0]["message"] == (
        "2 rank ile: İşin tamamı belleği tüketti ve sandbox tarafından durduruldu."
    )
    assert turkish["checks"][0]["hint"].startswith("Her rank'in başında")
    portuguese = localize_result(result, "pt-BR", hints={"dist.init": {"en": "E", "pt-BR": "P"}})
    assert portuguese["checks"][0]["hint"] == "P"  # the exercise's own hint wins
    assert localize_result(result, "en") == result


def test_a_plain_string_and_a_broken_translation_fall_back_to_english() -> None:
    check = {"id": "x.y", "status": "fail", "title": "T", "message": "plain", "hint": None}
    assert localize_result({"summary": "s", "checks": [check]}, "tr")["checks"][0] == check
    assert i18n.render("summary.failed", "english", {}, "tr") == "english"  # params missing


def test_a_check_s_own_message_translates_with_its_nested_parts() -> None:
    from tests.grader.test_checks import end, iteration, judge, run_of, start

    r0 = [start(0), iteration([0, 1, 2, 3], 0), end()]
    r1 = [start(1), iteration([0, 1, 2, 3], 0), end()]
    out = judge("sampler.shards", run_of(r0, r1))
    message_id, params = message_fields(out.message)
    assert message_id == "sampler.overlap"
    check = {
        "id": "sampler.shards",
        "status": "fail",
        "title": "",
        "message": str(out.message),
        "message_id": message_id,
        "params": params,
    }
    english = str(out.message)
    assert english.startswith("Rank 0 and rank 1 both saw 4 of the same samples (indices 0-3)")
    turkish = localize_result({"summary": "", "checks": [check]}, "tr")["checks"][0]["message"]
    assert turkish.startswith(
        "Rank 0 ve rank 1, veri üzerindeki 1. geçişlerinde aynı örneklerden 4 tanesini "
        "(indeksler 0-3) gördü."
    )
    portuguese = localize_result({"summary": "", "checks": [check]}, "pt-BR")["checks"][0]
    assert portuguese["message"].startswith(
        "O rank 0 e o rank 1 viram 4 das mesmas amostras (índices 0-3) na 1ª passada pelos dados."
    )
    assert "in their 1st pass over the data" in english  # {n:ordinal} in English
