"""Every grader message variant, rendered in en, tr and pt-BR, reads as prose: no clause said
twice (the launch prefix over a message that already names its launch), no check id such as
`ddp.wrapped` in the text, no parenthesis left open."""

from __future__ import annotations

import re
import string
from collections.abc import Iterator
from typing import Any

import pytest

import grader.i18n as i18n
from grader.checks.base import all_checks
from grader.i18n import Message, catalog, msg, render
from grader.stages import in_launch
from tests.grader.test_i18n import english_catalog

# A value per placeholder that no template contains, so a repeat can only come from a template.
NUMBER_SPECS = re.compile(r"^(ordinal|g|d|\.\d+[efg%]?|,)$")


def sample_params(template: str) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for index, (_, name, spec, _) in enumerate(string.Formatter().parse(template)):
        if not name:
            continue
        params[name] = 7 + index if spec and NUMBER_SPECS.match(spec) else f"P{index}q"
    return params


def variants() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(message id, English template, parameters) for every text the grader can emit."""
    for message_id, template in sorted(english_catalog().items()):
        yield message_id, template, sample_params(template)


def rendered(message_id: str, template: str, params: dict[str, Any], locale: str) -> str:
    english = msg(message_id, template, **params)
    return str(render(message_id, str(english), params, locale))


IDS = sorted(all_checks(), key=len, reverse=True)
# A check id in prose; `sampler.set_epoch(epoch)` is a call, not an id.
CHECK_ID = re.compile(r"\b(?:" + "|".join(re.escape(cid) for cid in IDS) + r")\b(?!\()")


def prose(text: str) -> str:
    """The text outside `code` spans."""
    return re.sub(r"`[^`]*`", " ", text)


def clauses(text: str) -> list[str]:
    parts = re.split(r"[:;,.()]\s*", prose(text).lower())
    return [" ".join(p.split()) for p in parts if len(p.split()) >= 3]


def problems(text: str) -> list[str]:
    found = []
    if CHECK_ID.search(prose(text)):
        found.append(f"a check id in prose: {CHECK_ID.search(prose(text))!r}")
    if prose(text).count("(") != prose(text).count(")"):
        found.append("unbalanced parentheses")
    seen = clauses(text)
    doubled = sorted({c for c in seen if seen.count(c) > 1})
    if doubled:
        found.append(f"a clause said twice: {doubled}")
    return found


@pytest.mark.parametrize("locale", i18n.LOCALES)
def test_every_message_reads_as_prose(locale: str) -> None:
    bad = []
    for message_id, template, params in variants():
        text = rendered(message_id, template, params, locale)
        bad += [f"{message_id}: {p}\n    {text}" for p in problems(text)]
    assert not bad, "\n".join(bad)


def launch_messages(nnodes: int, world_size: int) -> Iterator[Message]:
    """Every check message as it would come out of one launch (which it may name itself)."""
    for message_id, template, params in variants():
        if message_id.split(".")[0] in {"title", "hint", "combine", "summary", "platform"}:
            continue
        for name, value in (("nodes", nnodes), ("world", world_size), ("world_size", world_size)):
            if name in params:
                params[name] = value
        yield msg(message_id, template, **params)


@pytest.mark.parametrize("locale", i18n.LOCALES)
@pytest.mark.parametrize(("nnodes", "world_size"), [(2, 2), (1, 1), (1, 3)])
def test_a_failure_in_one_launch_names_it_once(locale: str, nnodes: int, world_size: int) -> None:
    bad = []
    for inner in launch_messages(nnodes, world_size):
        said = in_launch(inner, nnodes, world_size)
        message_id, params = i18n.message_fields(said)
        assert message_id is not None
        text = render(message_id, str(said), params, locale)
        bad += [f"{inner.message_id}: {p}\n    {text}" for p in problems(text)]
    assert not bad, "\n".join(bad)


def test_the_audit_sees_what_it_is_for() -> None:
    """The rules catch each fault they are for (so a green audit means something)."""
    assert problems("As a 2-node job (2 ranks): As a 2-node job (2 ranks), it failed.")
    assert problems("There is no DDP model to replay (see ddp.wrapped).")
    assert problems("Rank 1 stopped (after step 3.")
    assert not problems("Call `ddp.wrapped` here (rank 1, line 3).")
    assert set(catalog("tr")) == set(catalog("pt-BR"))
