"""Checkpoint writes count only when they reach storage (issue 29): where a torch.save went, as
the harness classifies it, and how ckpt.rank0_only counts it."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path
from typing import Any

from grader.harness.hooks.ckpt import _dcp_dir, _target
from tests.grader.test_checks import end, ev, judge, run_of, start


def save(path: str | None, target: str, line: int = 20) -> dict[str, Any]:
    return ev("save", path=path, target=target, line=line, ok=True, holds="state", model_state=True)


def test_a_path_and_a_file_open_on_disk_are_storage(tmp_path: Path) -> None:
    assert _target(tmp_path / "a.pt") == (str(tmp_path / "a.pt"), "path")
    assert _target(str(tmp_path / "b.pt"))[1] == "path"
    with open(tmp_path / "c.pt", "wb") as f:
        assert _target(f) == (str(tmp_path / "c.pt"), "file")
    with tempfile.TemporaryFile(dir=tmp_path) as unnamed:
        assert _target(unnamed)[1] == "file"


def test_an_in_memory_buffer_is_not_storage() -> None:
    assert _target(io.BytesIO()) == (None, "memory")

    class Sink:  # a writable object that is no file
        def write(self, data: bytes) -> int:
            return len(data)

    assert _target(Sink()) == (None, "memory")


def test_dcp_directory_from_checkpoint_id_or_writer(tmp_path: Path) -> None:
    assert _dcp_dir((), {"checkpoint_id": tmp_path / "ck"}) == str(tmp_path / "ck")

    class Writer:
        path = tmp_path / "w"

    assert _dcp_dir((Writer(),), {}) == str(tmp_path / "w")
    assert _dcp_dir((), {"storage_reader": Writer()}) == str(tmp_path / "w")  # a load's reader
    assert _dcp_dir((), {}) is None


def test_other_ranks_serialising_into_memory_do_not_fail_rank0_only() -> None:
    run = run_of(
        [start(0), save(None, "memory"), save("/work/snap.pt", "file", 31), end()],
        [start(1), save(None, "memory"), end()],
    )
    out = judge("ckpt.rank0_only", run)
    assert out.status == "pass", out.message
    assert "snap.pt" in out.message and "io.BytesIO" in out.message


def test_another_rank_writing_through_a_file_object_fails_and_names_the_file() -> None:
    run = run_of(
        [start(0), save("/work/w.ckpt", "file"), end()],
        [start(1), save("/work/w.ckpt", "file", 27), end()],
    )
    out = judge("ckpt.rank0_only", run)
    assert out.status == "fail"
    assert out.rank == 1 and out.line == 27 and "w.ckpt" in out.message


def test_another_rank_s_buffer_is_never_a_checkpoint() -> None:
    run = run_of([start(0), end()], [start(1), save(None, "memory"), end()])
    assert judge("ckpt.rank0_only", run).status == "fail"  # "never saved"
    assert judge("ckpt.unwrapped", run).status == "skip"


def test_a_dcp_save_on_every_rank_is_one_collective_checkpoint() -> None:
    run = run_of(
        [start(0), save("/work/ck", "dcp"), end()],
        [start(1), save("/work/ck", "dcp"), end()],
    )
    out = judge("ckpt.rank0_only", run)
    assert out.status == "pass", out.message
    assert "distributed checkpoint ck" in out.message


def test_a_state_serialised_into_memory_is_no_snapshot_for_the_fault() -> None:
    from grader.checks.base import RankView, RunView
    from grader.launch.faults import first_snapshot

    events: list[dict[str, Any]] = [{"kind": "step"} for _ in range(3)]
    events.append(save(None, "memory"))  # every epoch: broadcast the state from a buffer
    events += [{"kind": "step"} for _ in range(3)]
    events.append(save("/w/snapshot.pt", "path"))
    events += [{"kind": "step"} for _ in range(3)]
    ranks = [RankView(rank=0, exit_code=0, events=events)]
    assert first_snapshot(RunView(world_size=1, device="cpu", ranks=ranks).ranks) == (
        6,
        "/w/snapshot.pt",
    )


def test_rank0_serialising_into_memory_and_writing_the_bytes_itself_counts_as_its_save() -> None:
    # Object-store style: torch.save into a buffer, then the bytes are uploaded or written out.
    run = run_of([start(0), save(None, "memory"), end()], [start(1), end()])
    out = judge("ckpt.rank0_only", run)
    assert out.status == "pass" and "io.BytesIO" in out.message
    # Another rank's buffer is still no write, even then.
    both = run_of([start(0), save(None, "memory"), end()], [start(1), save(None, "memory"), end()])
    assert judge("ckpt.rank0_only", both).status == "pass"
