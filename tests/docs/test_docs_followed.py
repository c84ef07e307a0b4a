"""The authoring and translating guides, followed literally in a fresh copy of the repository.

A clone of HEAD in a temporary folder, run with this venv's interpreter (the copy first on the
path, nothing installed): scaffold the exercise of `docs/authoring.md` with the commands taken
from its code blocks, `validate`, and see the lesson still served; then add the language of
`docs/translating.md` with stand-in texts, following its table, and run `validate` and the
locale tests there. A doc change that breaks a command breaks this test. No grading is launched
(`tests/content/test_authoring.py` grades a scaffold).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.config import REPO_ROOT

# One clone for the module: under `make test` (--dist loadgroup) its tests share a worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("docs_followed")]

PYTHON = ".venv/bin/python"


def git(*args: str, cwd: Path = REPO_ROOT) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A clone of HEAD: what a newcomer gets (no build output, no local edits)."""
    target = tmp_path_factory.mktemp("fresh") / "rendezvous"
    git("clone", "--quiet", "--no-checkout", str(REPO_ROOT), str(target))
    git("checkout", "--quiet", "--detach", git("rev-parse", "HEAD"), cwd=target)
    yield target
    shutil.rmtree(target, ignore_errors=True)


def run(copy: Path, command: str | list[str], *, ok: bool = True) -> str:
    """A shell line of the docs (or argv), run in the copy with this venv's Python."""
    argv = command.split() if isinstance(command, str) else command
    if argv[0] in (PYTHON, "python"):
        argv = [sys.executable, *argv[1:]]
    elif argv[0] == "pybabel":
        argv = [sys.executable, "-m", "babel.messages.frontend", *argv[1:]]
    env = {**os.environ, "PYTHONPATH": str(copy)}
    done = subprocess.run(argv, cwd=copy, env=env, capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    if ok:
        assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{output}"
    return output


def code_commands(doc: str, section: str) -> list[str]:
    """The `.venv/bin/python -m app.content ...` lines of a section's code blocks."""
    body = doc.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", body, re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def table_row(doc: str, number: int) -> str:
    row = next(line for line in doc.splitlines() if line.startswith(f"| {number} |"))
    return row


def served(copy: Path) -> dict[str, list[str]]:
    """lesson id -> its exercise ids, as the site's catalog loads them from the copy."""
    script = (
        "import json; from app.config import REPO_ROOT; "
        "from app.content.loader import load_catalog; "
        "c = load_catalog(REPO_ROOT / 'lessons'); "
        "print(json.dumps({k: [e.id for e in v.lesson.exercises] for k, v in c.lessons.items()}))"
    )
    return json.loads(run(copy, ["python", "-c", script]).splitlines()[-1])


def test_the_copy_runs_its_own_code(copy: Path) -> None:
    out = run(copy, ["python", "-c", "import app, grader; print(app.__file__, grader.__file__)"])
    assert out.split()[0].startswith(str(copy)) and out.split()[1].startswith(str(copy))


def test_a_new_exercise_as_docs_authoring_says(copy: Path) -> None:
    doc = (copy / "docs" / "authoring.md").read_text(encoding="utf-8")
    commands = code_commands(doc, "A new exercise from the existing checks")
    scaffold = next(line for line in commands if " new-exercise " in line)
    validate = next(line for line in commands if line.endswith(" validate"))
    check = next(line for line in commands if " check-exercise " in line)
    lesson, slug = scaffold.split()[-2:]
    before = served(copy)
    assert lesson in before

    run(copy, scaffold)
    # The lesson has a sequence (lesson 2 does): the scaffold put the exercise in it.
    lesson_file = next((copy / "lessons").glob(f"[0-9][0-9]-{lesson}/lesson.yaml"))
    assert f"  - exercise: {slug}\n" in lesson_file.read_text(encoding="utf-8")
    out = run(copy, validate)
    assert "warning:" in out  # the English placeholders of the hint levels, listed
    after = served(copy)
    assert list(after) == list(before), "a lesson went offline"
    assert after[lesson] == [*before[lesson], slug]
    # The doc's check-exercise names the exercise it scaffolded (grading it is
    # tests/content/test_authoring.py's job).
    assert check.split()[-1] == f"{lesson}/{slug}"
    # Nothing the docs do not name needs editing: the shipped-lesson tests pass in the copy,
    # --strict aside (CI's gate for untranslated texts, which the doc names).
    out = run(
        copy,
        ["python", "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
         "tests/content/test_shipped_lessons.py",
         "--deselect",
         "tests/content/test_shipped_lessons.py::test_validate_passes_on_the_shipped_lessons"],
    )  # fmt: skip
    assert "passed" in out


def test_a_new_language_as_docs_translating_says(copy: Path) -> None:
    git("checkout", "--quiet", "--", ".", cwd=copy)  # a newcomer who only adds a language
    git("clean", "--quiet", "-fd", "--", "lessons", cwd=copy)
    doc = (copy / "docs" / "translating.md").read_text(encoding="utf-8")
    code = re.search(r"Say the new one is \w+, `([\w-]+)`", doc)
    assert code is not None
    locale = code[1]
    catalog_dir = locale.replace("-", "_")

    # 1: the switch.
    assert f'add `"{locale}"` to `LOCALES`' in table_row(doc, 1)
    i18n = copy / "grader" / "i18n.py"
    text = i18n.read_text(encoding="utf-8")
    locales = r"(LOCALES: tuple\[str, \.\.\.\] = \([^)]*)\)"
    text, count = re.subn(locales, rf'\1, "{locale}")', text)
    assert count == 1
    i18n.write_text(text, encoding="utf-8")
    # 2: the chooser's label.
    label = re.search(r'`LOCALE_NAMES\["[\w-]+"\] = "([^"]+)"`', table_row(doc, 2))
    assert label is not None
    app_i18n = copy / "app" / "i18n.py"
    text = app_i18n.read_text(encoding="utf-8")
    names = r"(LOCALE_NAMES: dict\[str, str\] = \{[^}]*)\}"
    text, count = re.subn(names, rf'\1, "{locale}": "{label[1]}"}}', text)
    assert count == 1
    app_i18n.write_text(text, encoding="utf-8")
    # 3: the interface catalog, from the template, with stand-in texts, compiled.
    commands = re.findall(r"`(pybabel [^`]+)`", table_row(doc, 3))
    init = next(line for line in commands if line.startswith("pybabel init"))
    compile_ = next(line for line in commands if line.startswith("pybabel compile"))
    run(copy, init)
    po_file = copy / "app" / "locales" / catalog_dir / "LC_MESSAGES" / "messages.po"
    po_file.write_text(stand_in_po(po_file.read_text(encoding="utf-8"), locale), encoding="utf-8")
    run(copy, compile_)
    # 4: the grader's messages, copied from tr, every value a stand-in.
    source = copy / "grader" / "locales" / "tr"
    assert "copy `grader/locales/tr/`" in table_row(doc, 4)
    (copy / "grader" / "locales" / locale).mkdir()
    for file in source.glob("*.json"):
        messages = json.loads(file.read_text(encoding="utf-8"))
        stand_ins = {key: f"[{locale}] {value}" for key, value in messages.items()}
        target = copy / "grader" / "locales" / locale / file.name
        target.write_text(json.dumps(stand_ins, ensure_ascii=False, indent=2), encoding="utf-8")
    # 5 (lesson texts) left partial, as the page allows; 6-8 are not needed by any code.

    out = run(copy, "python -m app.content validate")
    assert f"has no {locale}" in out  # a partial language warns, and exits 0
    assert len(served(copy)) == len(list((copy / "lessons").glob("[0-9][0-9]-*/lesson.yaml")))
    out = run(
        copy,
        ["python", "-m", "pytest", "-v", "-n", "0", "-p", "no:cacheprovider",
         "tests/web/test_locale.py", "tests/web/test_translations.py",
         "tests/grader/test_i18n.py", "tests/grader/test_message_audit.py",
         "tests/content/test_new_language.py"],
    )  # fmt: skip
    # The loops over languages took the new one in: its interface catalog was judged.
    assert f"test_every_interface_string_is_translated[{catalog_dir}] PASSED" in out


def stand_in_po(text: str, locale: str) -> str:
    """Every empty msgstr of a fresh catalog filled with its msgid, marked: a stand-in that
    keeps the placeholders (what a translator replaces)."""
    out: list[str] = []
    msgid: list[str] = []
    in_id = False
    for line in text.splitlines():
        if line.startswith("msgid "):
            msgid, in_id = [line[len("msgid ") :]], True
        elif in_id and line.startswith('"'):
            msgid.append(line)
        elif line.startswith("msgid_plural "):
            in_id = False
        elif line.startswith("msgstr") and line.endswith('""') and msgid != ['""']:
            in_id = False
            key = line.split(" ", 1)[0]
            out.append(f'{key} "[{locale}] "')
            out.extend(msgid)
            continue
        else:
            in_id = False
        out.append(line)
    return "\n".join(out) + "\n"
