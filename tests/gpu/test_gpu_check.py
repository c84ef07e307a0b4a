"""`make gpu-check` (grader.gpu_check) kept from rotting between GPU days: its wheel list against
the lockfile and the grader's imports, the plan it cuts to the host's GPUs, the purpose-made
programs it grades, and what the grader says about the torch that ran (grader.torch_internals).
The script itself runs on CPU in CI (`make gpu-check CPU=1`, .ci/run)."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from grader.checks.base import RankView, RunView, get_check
from grader.contract import CheckResult, ExerciseSpec, FaultSpec, LaunchSpec
from grader.exercises import graded_exercises, graded_specs
from grader.gpu_check import PROGRAMS, exercise_cases, fitted, program_cases
from grader.harness import compat
from grader.stages import not_judged_on_this_torch, torch_version
from grader.torch_internals import INTERNALS, checks_not_judged, hooks_left_out

ROOT = Path(__file__).resolve().parents[2]
# What a GPU host's image brings that the grader uses as it is (README, "The GPU check").
ON_THE_GPU_HOST = {"torch", "numpy"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _wheel_names() -> list[str]:
    lines = (ROOT / "scripts/gpu/wheels.txt").read_text().splitlines()
    return [_norm(line) for line in lines if line.strip() and not line.startswith("#")]


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if "==" in line and not line.startswith((" ", "#")):
            name, _, version = line.split(" ")[0].partition("==")
            pins[_norm(name)] = version
    return pins


def test_every_wheel_is_pinned_by_the_lockfile() -> None:
    pins = _pins()
    assert _wheel_names(), "the wheel list is empty"
    assert [name for name in _wheel_names() if name not in pins] == []


def test_the_wheels_cover_every_distribution_the_grader_imports() -> None:
    # The modules a GPU check imports in the host process and in every rank (the harness and
    # its hooks, the supervisor, the zygote), less the standard library and torch's own.
    probe = (
        "import sys\n"
        "import grader.gpu_check, grader.api, grader.cli, grader.harness.__main__\n"
        "import grader.inside.supervisor, grader.inside.zygote, grader.harness.hooks\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    top = set(out.stdout.split()) - set(sys.stdlib_module_names) - {"grader", "__main__"}
    owners = metadata.packages_distributions()
    needed = {_norm(d) for m in top if not m.startswith("_") for d in owners.get(m, [m])}
    assert needed - set(_wheel_names()) - ON_THE_GPU_HOST == set()


def _spec(**launch: Any) -> ExerciseSpec:
    return ExerciseSpec(checks=["run.completed"], launch=LaunchSpec(**launch))


def test_a_plan_keeps_the_world_sizes_that_fit_one_gpu_per_rank() -> None:
    spec, reason = fitted(_spec(world_sizes=[2, 3, 1]), 1, "cuda")
    assert reason is None and spec is not None
    assert (spec.launch.world_sizes, spec.launch.device) == ([1], "cuda")
    spec, _ = fitted(_spec(world_sizes=[2, 3, 1]), 2, "cuda")
    assert spec is not None and spec.launch.world_sizes == [2, 1]


def test_what_needs_more_gpus_is_not_run_with_the_reason() -> None:
    assert fitted(_spec(world_sizes=[2]), 1, "cuda") == (
        None,
        "needs 2 GPUs, one per rank; the host has 1",
    )
    _, resume = fitted(_spec(world_sizes=[2, 3, 1], resume=True), 2, "cuda")
    assert resume == "resumes across [2, 3, 1] ranks: needs 3 GPUs"
    faulted = _spec(world_sizes=[2], max_restarts=1, faults=[FaultSpec()])
    assert fitted(faulted, 1, "cuda")[1] == "needs 2 GPUs, one per rank; the host has 1"
    assert fitted(faulted, 2, "cuda")[0] is not None


def test_two_nodes_need_two_gpus_and_a_declared_cpu_exercise_runs_as_declared() -> None:
    one, _ = fitted(_spec(world_sizes=[2, 1], multinode=True), 1, "cuda")
    two, _ = fitted(_spec(world_sizes=[2, 1], multinode=True), 2, "cuda")
    assert one is not None and not one.launch.multinode
    assert two is not None and two.launch.multinode
    declared = _spec(world_sizes=[2, 3], device="cpu")
    assert fitted(declared, 1, "cuda") == (declared, None)


def test_the_purpose_made_programs_exist_and_expect_what_their_device_shows() -> None:
    exercises = graded_specs()
    assert list(exercises) == graded_exercises()
    on_gpu = {c.what: c for c in program_cases(exercises, 1, "cuda")}
    on_cpu = {c.what: c for c in program_cases(exercises, 1, "cpu")}
    for case in on_gpu.values():
        assert case.code, case.what
    wrong = "wrong: the model left on the CPU"
    assert (on_gpu[wrong].expected, on_gpu[wrong].must_fail) == ("fail", "device.pinned")
    assert on_cpu[wrong].expected == "pass"  # device.pinned is not judged on CPU workers
    no_backend = "no backend, then a CPU all-reduce"
    assert (on_gpu[no_backend].expected, on_gpu[no_backend].must_fail) == ("fail", "run.completed")
    assert on_gpu["statistics synchronised across GPUs"].not_run is not None  # needs 2 GPUs
    assert sorted(p.name for p in PROGRAMS.glob("*.py")) == [
        "fsdp2_device.py",
        "no_backend_cpu_allreduce.py",
        "pinned_right.py",
        "pinned_wrong.py",
    ]


def test_every_exercise_gets_a_solution_and_a_starter_row_or_the_reason_it_cannot_run() -> None:
    exercises = graded_specs()
    cases = exercise_cases(exercises, 1, "cuda")
    for exercise, (spec, _) in exercises.items():
        rows = [c for c in cases if c.item == exercise and c.what in ("solution", "starter")]
        assert [c.what for c in rows] == ["solution", "starter"], exercise
        launch = spec.launch
        # One GPU: world size 1 only, and nothing that builds on a larger run.
        fits = launch.device == "cpu" or (
            (1 in launch.world_sizes and not (launch.resume or launch.faults))
            or launch.world_sizes == [1]
        )
        assert all((c.not_run is None) == fits for c in rows), exercise
        assert rows[0].expected == "pass" and rows[0].strict


def test_every_internal_has_its_probe_and_this_torch_has_them_all() -> None:
    assert set(compat.PROBES) == {i.key for i in INTERNALS}
    assert compat.missing() == []  # the pinned torch (requirements.lock) has every one


def test_a_torch_without_an_internal_leaves_its_hooks_out_and_its_checks_not_judged() -> None:
    assert hooks_left_out(["dataloader_iterator"]) == {"data"}
    lacking = checks_not_judged(["dataloader_iterator"])
    assert set(lacking) == {"sampler.shards", "sampler.set_epoch"}
    record = {"kind": "torch_internals", "version": "2.11.0", "missing": ["dataloader_iterator"]}
    view = RunView(world_size=1, device="cuda", ranks=[RankView(0, 0, events=[record])])
    checks = [
        CheckResult(id="sampler.shards", status="fail", title="t", message="repeats"),
        CheckResult(id="run.completed", status="pass", title="t", message="ran"),
    ]
    shards, ran = not_judged_on_this_torch(checks, [view])
    assert shards.status == "skip" and "torch 2.11.0 lacks DataLoader" in shards.message
    assert shards.message_id == "stages.not_judged_torch"
    assert ran == checks[1]
    assert torch_version([view]) == "2.11.0"


def _ddp_rank(rank: int, local_rank: int, node: int, device: str) -> RankView:
    events = [
        {"kind": "start", "rank": rank},
        {"kind": "launch_env", "local_rank": str(local_rank), "group_rank": str(node)},
        {"kind": "ddp_init", "devices": [device], "device_ids": [device]},
        {"kind": "end", "status": "ok"},
    ]
    return RankView(rank=rank, exit_code=0, events=events)


def test_device_pinned_wants_the_gpu_of_the_local_rank_on_each_node() -> None:
    pinned = get_check("device.pinned")
    assert pinned is not None
    two_nodes = RunView(
        world_size=2,
        device="cuda",
        nnodes=2,
        ranks=[_ddp_rank(0, 0, 0, "cuda:0"), _ddp_rank(1, 0, 1, "cuda:0")],
    )
    assert pinned.fn(two_nodes, {}).status == "pass"
    shared = RunView(
        world_size=2,
        device="cuda",
        ranks=[_ddp_rank(0, 0, 0, "cuda:0"), _ddp_rank(1, 1, 0, "cuda:0")],
    )
    out = pinned.fn(shared, {})
    assert out.status == "fail" and "cuda:1" in out.message


def test_a_job_with_gpus_gets_no_address_space_limit_which_cuda_cannot_start_under() -> None:
    from grader.contract import Limits
    from grader.sandbox.limits import rlimits_for

    assert "as" in rlimits_for(Limits(), nproc=False)
    on_gpus = rlimits_for(Limits(), nproc=False, gpus=True)
    assert "as" not in on_gpus and on_gpus["core"] == 0 and on_gpus["fsize"] > 0


def test_the_probes_import_nothing_the_hooks_wait_for() -> None:
    # Importing torch.distributed.optim compiles TorchScript (seconds per rank): the zero hook
    # waits for the program to import it, and the probe reads its module's text instead.
    probe = (
        "import sys, torch\n"
        "from grader.harness import compat\n"
        "assert compat.missing() == [], compat.missing()\n"
        "print('torch.distributed.optim' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "False"
