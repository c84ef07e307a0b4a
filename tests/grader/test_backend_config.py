"""A group made without a backend records its per-device config ("cpu:gloo,cuda:nccl": what
get_backend_config() answers; get_backend() says "undefined" for it): dist.init and the Result's
backend read the device's part, on GPU and CPU alike."""

from __future__ import annotations

from typing import Any

from grader.checks.base import RankView, RunView, get_check
from grader.judge import _backend
from grader.launch.plan import Launch


def ev(kind: str, **data: Any) -> dict[str, Any]:
    return {"kind": kind, "t": 0.0, "sync": 0, **data}


def run(device: str, requested: str | None, backend: str) -> RunView:
    views = [
        RankView(
            rank=rank,
            exit_code=0,
            events=[
                ev("start", pid=100 + rank, file="/work/main.py"),
                ev("init", requested=requested, backend=backend, rank=rank, world_size=2, line=5),
                ev("end", status="ok", exit_code=0),
            ],
        )
        for rank in range(2)
    ]
    return RunView(world_size=2, device=device, ranks=views, source="x\n" * 10)


def status(view: RunView) -> str:
    return str(get_check("dist.init").fn(view, {}).status)


def test_no_backend_named_passes_on_a_gpu_worker_and_reports_nccl() -> None:
    view = run("cuda", None, "cpu:gloo,cuda:nccl")
    assert status(view) == "pass"
    assert _backend(view, Launch(world_size=2, device="cuda", gpus=[0, 1])) == "nccl"
    assert _backend(view, Launch(world_size=2, device="cpu", gpus=[])) == "gloo"


def test_gloo_everywhere_still_fails_on_a_gpu_worker() -> None:
    view = run("cuda", "gloo", "cpu:gloo,cuda:gloo")
    assert status(view) == "fail"
    assert _backend(view, Launch(world_size=2, device="cuda", gpus=[0, 1])) == "gloo"


def test_a_plain_backend_name_is_reported_as_it_is() -> None:
    view = run("cpu", "gloo", "gloo")
    assert status(view) == "pass"
    assert _backend(view, Launch(world_size=2, device="cpu", gpus=[])) == "gloo"
