"""docs/authoring.md lists every check of the grader, with its title, every parameter the check
functions read, and the message ids they write: an author never needs the grader's code."""

from __future__ import annotations

import inspect
import re

from app.config import REPO_ROOT
from grader.checks import all_checks

DOC = (REPO_ROOT / "docs" / "authoring.md").read_text(encoding="utf-8")


def section(check_id: str) -> str:
    start = DOC.index(f"#### `{check_id}`\n")
    end = DOC.find("\n#### ", start + 1)
    return DOC[start : end if end != -1 else len(DOC)]


def test_every_check_has_its_section_with_title_and_hint() -> None:
    for check_id, check in all_checks().items():
        text = section(check_id)
        assert check.title in text, check_id
        assert check.hint in text, check_id


def test_every_parameter_and_message_of_a_check_is_documented() -> None:
    for check_id, check in all_checks().items():
        source = inspect.getsource(check.fn)
        text = section(check_id)
        for name in re.findall(r'params(?:\.get\(|\[)"(\w+)"', source):
            assert f"`{name}`" in text, f"{check_id}: parameter {name}"
        for message_id in re.findall(r'msg\(\s*"([\w.]+)"', source):
            assert f"`{message_id}`" in text, f"{check_id}: message {message_id}"
