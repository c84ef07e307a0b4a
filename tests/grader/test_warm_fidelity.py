"""A rank in a warm sandbox is, for the learner's program, a rank torchrun spawned.

`fidelity/probe.py` prints what a rank can see of its own process (argv, __main__, environment,
cwd, limits, descriptors, signal handlers and mask, threads, generators, hash seed...). It is graded
cold (RDV_WARM_POOL=0) and warm, where every rank is a spare interpreter the sandbox started
ahead (grader.inside.spares), and the two must agree on everything that is not drawn afresh per run;
what is drawn per process (generator states, the str hash seed) must differ between ranks.

Spares are fresh interpreters, each with its own str hash seed: `fidelity/set_order.py` registers
its layers in the order of a set of names, which DDP rejects when ranks spawned by torchrun
disagree, and so do spares.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from grader.contract import Job, Result
from grader.sandbox.pool import Pool

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]
HERE = Path(__file__).parent / "fidelity"
EXERCISE = "ddp-fundamentals/train"
# Drawn afresh for every run (a port, a run id and the paths named after them).
PER_RUN_ENV = {"MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE"}
PER_PROCESS = ("seed", "numpy", "random", "hash")
# Imports: compared on their own (a spare may hold more at the program's start: see below).
IMPORTS = ("start", "after")


def grade_file(name: str, *, pool: int) -> Result:
    from grader.api import grade
    from grader.exercises import load_spec

    spec = load_spec(EXERCISE)
    spec.launch.world_sizes = [2]
    # The probe prints every module it holds: room for them.
    spec.limits = spec.limits.model_copy(
        update={"wall_seconds": 120, "output_bytes_per_rank": 1 << 20}
    )
    job = Job(
        exercise=EXERCISE, code=(HERE / name).read_text(), spec=spec, submission_id="fidelity"
    )
    owned = Pool(pool) if pool else None
    try:
        result = grade(job, sandbox="bwrap", pool=owned)
        assert result.launch is not None, result.summary
        if owned is not None:
            assert owned.stats.served == 1, owned.stats
            assert result.launch.warm_launches == 1
            assert result.launch.spare_ranks == 2
        else:
            assert (result.launch.warm_launches, result.launch.spare_ranks) == (0, 0)
        return result
    finally:
        if owned is not None:
            owned.close()


def probes(result: Result) -> dict[int, dict[str, Any]]:
    found: dict[int, dict[str, Any]] = {}
    modules: dict[tuple[int, str], list[str]] = {}
    for rank in result.ranks:
        for line in rank.output.splitlines():
            if line.startswith("PROBE "):
                found[rank.rank] = json.loads(line[len("PROBE ") :])
            elif line.startswith("MODULES "):
                _, tag, names = line.split(" ", 2)
                modules.setdefault((rank.rank, tag), []).extend(json.loads(names))
    assert sorted(found) == [0, 1], [r.output[-2000:] for r in result.ranks]
    for (rank, tag), names in modules.items():
        found[rank][tag] = names
    return found


def comparable(probe: dict[str, Any]) -> dict[str, Any]:
    """What must be the same in every run: per-run names normalised, per-process draws out."""
    out = {k: v for k, v in probe.items() if k not in PER_PROCESS + IMPORTS}
    out["env"] = {k: v for k, v in probe["env"].items() if k not in PER_RUN_ENV}
    fds = {
        fd: re.sub(r"\.rdv-[a-z0-9_]+|logs/[^/]+|\[\d+\]", "*", target)
        for fd, target in probe["fds"].items()
    }
    out["fds"] = fds
    return out


def assert_drawn_per_process(found: dict[int, dict[str, Any]], keys: tuple[str, ...]) -> None:
    for key in keys:
        assert found[0][key] != found[1][key], f"{key} is the same on both ranks"


def test_a_rank_in_a_warm_sandbox_sees_what_a_cold_one_sees() -> None:
    cold = probes(grade_file("probe.py", pool=0))
    hot = probes(grade_file("probe.py", pool=1))
    for rank in (0, 1):
        assert comparable(hot[rank]) == comparable(cold[rank])
        # At the program's first line a spare holds what a spawned rank holds, and at most what
        # a spawned rank holds once it wrapped a model in DDP (grader.harness.spare.AHEAD).
        started, cold_start = set(hot[rank]["start"]), set(cold[rank]["start"])
        assert cold_start <= started
        assert started <= set(cold[rank]["after"]), sorted(started - set(cold[rank]["after"]))
        assert hot[rank]["after"] == cold[rank]["after"]
    assert_drawn_per_process(cold, PER_PROCESS)
    assert_drawn_per_process(hot, PER_PROCESS)


def test_a_set_order_bug_fails_in_a_warm_sandbox() -> None:
    result = grade_file("set_order.py", pool=1)
    assert result.status == "fail", result.summary
    failed = {c.id for c in result.checks if c.status == "fail"}
    assert "run.completed" in failed, failed


# Graded cold (a supervisor started for the job, its ranks spawned by torch), held to the verdict
# and failed checks their golden suite holds the warm grading to: a sample of the golden suites'
# cases (every case graded both ways and compared: `python -m benchmarks warm_fidelity`), each
# where a rank's own process matters: generators (a split drawn per rank, weights never
# broadcast), restarts (a fresh process for the second attempt) and the simulated 2-node job.
# Their warm twins are the golden suites' own tests, so each case is graded once here, not twice.
SAMPLE = (
    "redteam/bug_random_split_per_rank",
    "exercises/allreduce-by-hand/fail_no_broadcast",
    "exercises/elastic-resume/pass_class_trainer",
    "exercises/env-launch/fail_every_process_saves",
)


@pytest.mark.parametrize("name", SAMPLE)
def test_a_sampled_case_is_judged_cold_as_warm(name: str) -> None:
    from tests.grader.golden import SUITES, assert_graded_as_expected

    by_name = {f"{c.suite.root.name}/{c.name}": c for s in SUITES for c in s.cases()}
    result = assert_graded_as_expected(by_name[name])  # no pool: every launch cold
    assert result.launch is not None, result.summary
    assert (result.launch.warm_launches, result.launch.spare_ranks) == (0, 0), result.launch


@pytest.mark.parametrize("pool", [0, 1])
def test_a_simulated_two_node_job_runs_each_rank_under_its_nodes_agent(
    pool: int,
) -> None:
    """Every node's agent is its own interpreter, as on two machines, and so is every rank, the
    agent's child: spawned by it cold, a spare it started ahead warm (what DDP imports already
    imported)."""
    from grader.api import grade
    from grader.contract import GradeEvent
    from grader.exercises import load_spec

    exercise = "torchrun-launch/env-launch"
    spec = load_spec(exercise)
    assert spec.launch.multinode
    spec.launch.world_sizes = []  # the 2-node launch alone: one rank on each node
    job = Job(
        exercise=exercise,
        code=(HERE / "node_probe.py").read_text(),
        spec=spec,
        submission_id="fidelity",
    )
    lines: list[str] = []

    def on_event(event: GradeEvent) -> None:
        if event.kind == "output" and event.data["line"].startswith("NODE "):
            lines.append(event.data["line"][len("NODE ") :])

    owned = Pool(pool) if pool else None
    try:
        result = grade(job, on_event=on_event, sandbox="bwrap", pool=owned)
    finally:
        if owned is not None:
            owned.close()
    assert result.launch is not None and result.launch.nnodes == 2, result.summary
    assert result.launch.spare_ranks == 2 * pool, result.launch
    found = {probe["rank"]: probe for probe in map(json.loads, lines)}
    assert sorted(found) == [0, 1], (result.summary, [r.output[-2000:] for r in result.ranks])
    for probe in found.values():
        assert probe["ahead"] is bool(pool), probe
        # The agent a rank runs under: its node's own interpreter, never the supervisor.
        module = probe["parent"][probe["parent"].index("-m") + 1]
        assert module == "grader.inside.multinode", probe
