"""Ablations: every exercise of the course states what a right answer needs by breaking it.

Each `ablations:` entry of an exercise is the solution with named edits applied; graded (at its
one launch when it names one, docs/authoring.md "Ablations"), it must fail, with its named check
among the failed ones. The graded test goes through the same path as the exercise golden suites
(`grader.api.grade` in a prepared sandbox, the process-group timeout capped as they cap it);
the others check the model, `validate`'s file:line errors, the launch restriction and
`check-exercise`'s report without grading anything.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.content import authoring
from app.content.__main__ import main
from app.content.ablations import EditDoesNotApply, ablated, graded_spec
from app.content.loader import LoadedLesson, load_catalog
from app.content.schemas import Ablation, Exercise, json_schema
from grader.api import grade
from grader.contract import ExerciseSpec, Job, Result
from grader.launch.plan import plan_launches
from grader.sandbox.pool import Pool

LESSONS = Path(__file__).resolve().parents[2] / "lessons"
MIN_ABLATIONS = 4
PG_TIMEOUT_S = 10  # as tests/grader/golden.py caps it: a hang fails fast


def _course() -> list[tuple[LoadedLesson, Exercise]]:
    catalog = load_catalog(LESSONS)
    assert not catalog.problems, [str(p) for p in catalog.problems]
    return [(loaded, ex) for loaded in catalog.ordered for ex in loaded.lesson.exercises]


COURSE = _course()
CASES = [(loaded, ex, ab) for loaded, ex in COURSE for ab in ex.ablations]


def _solution(loaded: LoadedLesson, exercise: Exercise) -> str:
    return (loaded.exercise_dir(exercise.id) / "solution.py").read_text(encoding="utf-8")


def test_every_exercise_of_the_course_declares_its_essentials_as_ablations() -> None:
    assert len(COURSE) >= 11
    few = {f"{loaded.id}/{ex.id}": len(ex.ablations) for loaded, ex in COURSE}
    assert {k: n for k, n in few.items() if n < MIN_ABLATIONS} == {}


def test_every_ablation_builds_a_program_that_differs_and_compiles() -> None:
    for loaded, exercise, ablation in CASES:
        code = ablated(_solution(loaded, exercise), ablation)
        compile(code, f"{exercise.id}:{ablation.id}", "exec")


def test_a_find_that_does_not_occur_exactly_once_is_refused_with_file_and_line(
    lessons_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = lessons_copy / "02-second-lesson" / "lesson.yaml"
    text = file.read_text(encoding="utf-8")
    entry = (
        "    ablations:\n"
        "      - id: no-print\n"
        "        what: drop the print\n"
        "        edits:\n"
        '          - find: "print(\\"hello from\\", dist.get_rank())\\n"\n'
        '            replace: ""\n'
        "        fails: run.completed\n"
        "      - id: twice\n"
        "        what: a find that occurs twice\n"
        "        edits:\n"
        '          - find: "dist."\n'
        '            replace: "torch.distributed."\n'
        "        fails: run.completed\n"
        "      - id: absent\n"
        "        what: a find that is not there\n"
        "        edits:\n"
        '          - find: "import torch.distributed as dist\\n"\n'
        '            replace: ""\n'
        '          - find: "dist.init_process_group()"\n'
        '            replace: "pass"\n'
        '          - find: "no such line"\n'
        '            replace: ""\n'
        "        fails: run.completed\n"
    )
    file.write_text(text.replace("    grading:\n", entry + "    grading:\n", 1), encoding="utf-8")
    code = main(["validate", "--lessons-dir", str(lessons_copy)])
    lines = capsys.readouterr().out.splitlines()
    numbered = file.read_text(encoding="utf-8").splitlines()
    twice = 1 + numbered.index('          - find: "dist."')
    absent = 1 + numbered.index('          - find: "no such line"')
    assert code == 1
    assert lines == [
        f"{file}:{twice}: exercises[0].ablations[1].edits[0].find: twice: `find` occurs 3 times "
        "in the solution (after the edits before it); it must occur exactly once: quote more "
        "of the line to make it unique",
        f"{file}:{absent}: exercises[0].ablations[2].edits[2].find: absent: `find` does not "
        "occur in the solution (after the edits before it); it must occur exactly once: quote "
        "more of the line to make it unique",
    ]


def test_an_ablation_names_a_graded_check_a_launch_it_has_and_a_unique_id() -> None:
    base = {
        "id": "x",
        "title": "X",
        "prompt": "p",
        "grading": {"checks": ["run.completed"], "launch": {"world_sizes": [2, 1]}},
    }
    edit = {"find": "a", "replace": "b"}
    bad = [
        {"id": "a", "what": "w", "edits": [edit], "fails": "ddp.wrapped"},
        {"id": "a", "what": "w", "edits": [edit], "fails": "run.completed", "launch": 2},
    ]
    with pytest.raises(ValueError) as caught:
        Exercise.model_validate({**base, "ablations": bad})
    text = str(caught.value)
    assert "'ddp.wrapped', which is not in `grading.checks`" in text
    assert "the ablation id 'a' is used twice" in text
    assert "names launch 2; the exercise makes 2 (0 to 1)" in text
    with pytest.raises(ValueError):
        Ablation.model_validate({"id": "a", "what": "w", "edits": [], "fails": "run.completed"})


def test_edits_apply_in_order_and_each_must_match_once() -> None:
    ablation = Ablation.model_validate(
        {
            "id": "a",
            "what": "w",
            "edits": [{"find": "x = 1\n", "replace": "x = 2\n"}, {"find": "x = 2", "replace": "y"}],
            "fails": "run.completed",
        }
    )
    assert ablated("x = 1\nz = 3\n", ablation) == "y\nz = 3\n"
    with pytest.raises(EditDoesNotApply) as caught:
        ablated("x = 1\nx = 2\n", ablation)
    assert (caught.value.edit, caught.value.count) == (1, 2)


def test_only_launch_keeps_what_the_launch_needs() -> None:
    plain = ExerciseSpec.model_validate(
        {
            "checks": ["run.completed"],
            "launch": {
                "world_sizes": [2, 3, 1],
                "script_args": ["--epochs", "2"],
                "script_args_per_launch": [["--samples", "25"], ["--samples", "23"]],
            },
        }
    )
    assert plain.launch_count() == 3
    one = plain.only_launch(1)
    assert one.launch.world_sizes == [3] and one.checks == plain.checks
    assert [launch.script_args for launch in plan_launches(one)] == [
        ("--epochs", "2", "--samples", "23")
    ]
    assert [launch.script_args for launch in plan_launches(plain.only_launch(2))] == [
        ("--epochs", "2")
    ]
    resumed = plain.model_copy(
        update={"launch": plain.launch.model_copy(update={"resume": True})}
    ).only_launch(1)
    assert resumed.launch.world_sizes == [2, 3]  # it starts from the files launch 0 left
    multinode = ExerciseSpec.model_validate(
        {"checks": ["run.completed"], "launch": {"world_sizes": [2, 3], "multinode": True}}
    )
    assert multinode.launch_count() == 3
    last = plan_launches(multinode.only_launch(2))
    assert [(launch.world_size, launch.nnodes) for launch in last] == [(2, 1), (2, 2)]
    with pytest.raises(ValueError, match="out of range"):
        plain.only_launch(3)


def test_the_json_schema_describes_ablations() -> None:
    definitions = json_schema("lesson")["$defs"]
    assert isinstance(definitions, dict)
    assert set(definitions["Ablation"]["properties"]) == {"id", "what", "edits", "fails", "launch"}
    assert set(definitions["Edit"]["properties"]) == {"find", "replace"}
    assert "ablations" in definitions["Exercise"]["properties"]


def _result(failed: list[str]) -> Result:
    status = "fail" if failed else "pass"
    checks = [{"id": c, "status": "fail", "title": c, "message": "m"} for c in failed]
    return Result.model_validate(
        {"status": status, "summary": status, "checks": checks, "ranks": [], "error": None}
    )


def test_check_exercise_grades_each_ablation_at_its_launch_and_needs_its_check(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    graded: list[tuple[str, list[int]]] = []
    name = "torchrun-launch/find-the-hang"
    loaded, exercise = next((lo, ex) for lo, ex in COURSE if f"{lo.id}/{ex.id}" == name)
    by_code = {ablated(_solution(loaded, exercise), ab): ab for ab in exercise.ablations}

    def fake(_: LoadedLesson, slug: str, code: str, spec: ExerciseSpec | None = None) -> Result:
        ablation = by_code.get(code)
        if ablation is None:  # the solution passes, the starter fails
            return _result([] if "Join" in code else ["run.completed"])
        assert spec is not None
        graded.append((ablation.id, spec.launch.world_sizes))
        # The first ablation is caught by another check than the one it names.
        first = ablation is exercise.ablations[0]
        return _result(["run.completed"] if first else [ablation.fails])

    monkeypatch.setattr(authoring, "_grade", fake)
    assert authoring.check_exercise(LESSONS, name) == 1
    out = capsys.readouterr().out
    sizes = exercise.grading.launch.world_sizes
    assert graded == [
        (ab.id, [sizes[ab.launch]] if ab.launch is not None else sizes) for ab in exercise.ablations
    ]
    first = exercise.ablations[0]
    assert f"grading ablation {first.id} at launch {first.launch}" in out
    assert f"it must fail {first.fails}" in out
    assert f"{exercise.ablations[1].fails} caught it, as it must" in out


@pytest.fixture(scope="module")
def ablation_pool() -> Iterator[Pool]:
    """One prepared sandbox at a time, as tests/grader/conftest.py's suite pool."""
    with Pool(1) as pool:
        yield pool


def _spec(exercise: Exercise, ablation: Ablation) -> ExerciseSpec:
    base = exercise.grading.model_dump()
    base["limits"]["pg_timeout_seconds"] = min(base["limits"]["pg_timeout_seconds"], PG_TIMEOUT_S)
    return graded_spec(ExerciseSpec.model_validate(base), ablation)


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.parametrize(
    ("loaded", "exercise", "ablation"),
    CASES,
    ids=[f"{lo.id}/{ex.id}:{ab.id}" for lo, ex, ab in CASES],
)
def test_each_ablation_fails_with_its_check(
    loaded: LoadedLesson, exercise: Exercise, ablation: Ablation, ablation_pool: Pool
) -> None:
    job = Job(
        exercise=f"{loaded.id}/{exercise.id}",
        code=ablated(_solution(loaded, exercise), ablation),
        spec=_spec(exercise, ablation),
        submission_id=f"ablation-{exercise.id}-{ablation.id}",
    )
    result = grade(job, sandbox=os.environ.get("RDV_GOLDEN_SANDBOX"), pool=ablation_pool)
    failed = [c.id for c in result.checks if c.status == "fail"]
    report = "\n".join(f"  {c.status} {c.id}: {c.message}" for c in result.checks)
    assert result.status == "fail", f"{ablation.id} ({ablation.what}) passed:\n{report}"
    assert ablation.fails in failed, f"{ablation.id}: {ablation.fails} did not fail:\n{report}"
