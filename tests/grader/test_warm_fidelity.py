"""A rank forked by the zygote (grader.inside.zygote), cold or warm, is for the learner's program
a rank torchrun spawned, but for one documented difference.

`fidelity/probe.py` prints what a rank can see of its own process (argv, __main__, environment,
cwd, limits, descriptors, signal handlers and mask, threads, generators, hash seed...). It is graded
with ranks spawned by torch's agent (the supervisor's `--spawn-ranks`, what torchrun does), and
with ranks forked by the zygote in a cold and in a warm sandbox; they must agree on everything
that is not drawn afresh per run, and what is drawn per process (generator states) must differ
between ranks.

The difference: forked ranks share their launch's str hash seed. `fidelity/set_order.py`
registers its layers in the order of a set of names, which DDP rejects when ranks spawned by
torchrun disagree; forked ranks agree, so it passes (README, "How a rank starts").
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
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
# What forked ranks draw per process: all of it but the str hash seed, drawn per launch.
PER_FORKED = ("seed", "numpy", "random")
# Imports: compared on their own (a spare may hold more at the program's start: see below).
IMPORTS = ("start", "after")


def grade_file(
    name: str, *, pool: int, spawn: bool = False, monkeypatch: pytest.MonkeyPatch | None = None
) -> Result:
    """Grade `name` with ranks forked by the zygote (cold, or warm with a pool of `pool`), or
    spawned by torch's agent (`spawn`, cold: the supervisor's --spawn-ranks)."""
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
    if spawn:
        assert monkeypatch is not None and not pool
        from grader.launch import host

        argv = host.supervisor_argv()
        monkeypatch.setattr(host, "supervisor_argv", lambda: [*argv, "--spawn-ranks"])
    owned = Pool(pool) if pool else None
    try:
        result = grade(job, sandbox="bwrap", pool=owned)
        assert result.launch is not None, result.summary
        if owned is not None:
            assert owned.stats.served == 1, owned.stats
            assert result.launch.warm_launches == 1
        else:
            assert result.launch.warm_launches == 0
        assert result.launch.spare_ranks == (0 if spawn else 2), result.launch
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


def supervisor_imports() -> set[str]:
    """What a forked rank may hold at its first line beyond what a spawned DDP program imports:
    the supervisor's launcher (torch's elastic agent) and checkpoint inspection, forked along."""
    code = (
        "import sys, torch.distributed.launcher.api, grader.inside.inspect_ckpt;"
        "print(' '.join(sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_a_forked_rank_sees_what_a_spawned_one_sees(monkeypatch: pytest.MonkeyPatch) -> None:
    spawned = probes(grade_file("probe.py", pool=0, spawn=True, monkeypatch=monkeypatch))
    monkeypatch.undo()
    cold = probes(grade_file("probe.py", pool=0))
    hot = probes(grade_file("probe.py", pool=1))
    supervisor = supervisor_imports()
    for rank in (0, 1):
        assert comparable(cold[rank]) == comparable(spawned[rank])
        assert comparable(hot[rank]) == comparable(spawned[rank])
        # At the program's first line a forked rank holds what a spawned rank holds, and at
        # most what a spawned rank holds once it wrapped a model in DDP
        # (grader.inside.zygote.AHEAD), with the supervisor's own imports.
        for forked in (cold, hot):
            started = set(forked[rank]["start"])
            assert set(spawned[rank]["start"]) <= started
            extra = started - set(spawned[rank]["after"])
            assert extra <= supervisor, sorted(extra - supervisor)
            assert set(forked[rank]["after"]) - set(spawned[rank]["after"]) <= extra
    assert_drawn_per_process(spawned, PER_PROCESS)
    assert_drawn_per_process(cold, PER_FORKED)
    assert_drawn_per_process(hot, PER_FORKED)
    # The documented difference: one str hash seed per launch, shared by its forked ranks.
    assert cold[0]["hash"] == cold[1]["hash"] and hot[0]["hash"] == hot[1]["hash"]


def test_a_set_order_bug_fails_with_spawned_ranks_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The price of forked ranks, measured so that it stays known: torchrun's ranks disagree on
    the order of a set of names and DDP refuses the model; forked ranks agree."""
    spawned = grade_file("set_order.py", pool=0, spawn=True, monkeypatch=monkeypatch)
    assert spawned.status == "fail", spawned.summary
    assert "run.completed" in {c.id for c in spawned.checks if c.status == "fail"}
    monkeypatch.undo()
    forked = grade_file("set_order.py", pool=1)
    assert forked.status == "pass", forked.summary


# Graded cold (a supervisor started for the job, its ranks forked by its zygote), held to the
# verdict and failed checks their golden suite holds the warm grading to: a sample of the golden
# suites' cases (every case graded both ways and compared: `python -m benchmarks warm_fidelity`),
# each where a rank's own process matters: generators (a split drawn per rank, weights never
# broadcast), restarts (a fresh rank for the second attempt) and the simulated 2-node job.
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
    assert result.launch.warm_launches == 0, result.launch


@pytest.mark.parametrize("pool", [0, 1])
def test_a_simulated_two_node_job_runs_each_rank_under_its_nodes_agent(
    pool: int,
) -> None:
    """Every node has its own agent, as on two machines, and every rank runs under its node's
    agent: forked by that agent's own zygote, cold and warm (what DDP imports already imported).
    The agents are forked by the supervisor's zygote, so a sandbox prepared for any launch serves
    this one."""
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
    assert result.launch.spare_ranks == 2, result.launch  # each node's zygote forked its rank
    found = {probe["rank"]: probe for probe in map(json.loads, lines)}
    assert sorted(found) == [0, 1], (result.summary, [r.output[-2000:] for r in result.ranks])
    for probe in found.values():
        assert probe["ahead"] is True, probe
    # Two agents, each with its own zygote: one per node.
    assert found[0]["agent"] != found[1]["agent"], found
    assert found[0]["zygote"] != found[1]["zygote"], found
    assert {p["zygote"] for p in found.values()}.isdisjoint(p["agent"] for p in found.values())
    for probe in found.values():  # each agent forked by the supervisor's zygote, not exec'd
        assert "grader.inside.supervisor" in probe["agent_cmd"], probe
