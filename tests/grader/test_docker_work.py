"""The Docker sandbox's size-capped work volume (grader.sandbox.docker_work), against a fake
holder container that speaks the engine's archive API (tar streams). The real engine runs it in
`make scale-test`."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.sandbox import docker_work
from grader.sandbox.docker_work import WorkVolume


class FakeHolder:
    def __init__(self, outgoing: bytes = b"") -> None:
        self.received: bytes = b""
        self.outgoing = outgoing

    def put_archive(self, path: str, data: bytes) -> bool:
        assert path == "/work"
        self.received = data
        return True

    def get_archive(self, path: str) -> tuple[Iterator[bytes], dict[str, Any]]:
        assert path == "/work"
        return iter([self.outgoing[i : i + 4096] for i in range(0, len(self.outgoing), 4096)]), {}


def _volume(holder: FakeHolder) -> WorkVolume:
    work = WorkVolume(None, image="img", user="10001:10001", disk_mb=64, labels={})
    work.holder = holder
    return work


def _archive(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for info, content in members:
            info.size = len(content) if info.isfile() else 0
            tar.addfile(info, io.BytesIO(content) if info.isfile() else None)
    return data.getvalue()


def _entry(name: str, kind: bytes = tarfile.REGTYPE, target: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def test_the_job_goes_in_owned_by_the_sandbox_user(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("print(1)\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.txt").write_text("x")
    (tmp_path / "link").symlink_to("/etc/passwd")
    holder = FakeHolder()
    _volume(holder).copy_in(tmp_path)
    with tarfile.open(fileobj=io.BytesIO(holder.received)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert sorted(members) == ["data", "data/x.txt", "main.py"]  # no link
        assert {(m.uid, m.gid) for m in members.values()} == {(10001, 10001)}
        main = tar.extractfile(members["main.py"])
        assert main is not None and main.read() == b"print(1)\n"


def test_only_regular_files_inside_the_work_dir_come_back(tmp_path: Path) -> None:
    outgoing = _archive(
        (_entry("work", tarfile.DIRTYPE), b""),
        (_entry("work/rank-0-a0.jsonl"), b'{"kind":"start"}\n'),
        (_entry("work/out", tarfile.DIRTYPE), b""),
        (_entry("work/out/ckpt.pt"), b"weights"),
        (_entry("work/shadow", tarfile.SYMTYPE, "/etc/shadow"), b""),
        (_entry("work/../escape.txt"), b"no"),
        (_entry("work/fifo", tarfile.FIFOTYPE), b""),
    )
    (tmp_path / "main.py").write_text("print(1)\n")
    problems = _volume(FakeHolder(outgoing)).copy_out(tmp_path)
    assert (tmp_path / "rank-0-a0.jsonl").read_text() == '{"kind":"start"}\n'
    assert (tmp_path / "out" / "ckpt.pt").read_bytes() == b"weights"
    assert not (tmp_path / "shadow").exists() and not (tmp_path / "fifo").exists()
    assert not (tmp_path.parent / "escape.txt").exists()
    assert (tmp_path / "main.py").read_text() == "print(1)\n"
    assert any("shadow" in p for p in problems) and any("escape" in p for p in problems)


class FlakyEngine:
    """`containers.create` as the engine answers it; the first `fails` starts fail with `status`."""

    def __init__(self, fails: int, status: int = 500) -> None:
        self.fails, self.status = fails, status
        self.created: list[FlakyContainer] = []
        self.containers = self

    def create(self, **kwargs: Any) -> FlakyContainer:
        container = FlakyContainer(self, kwargs)
        self.created.append(container)
        return container


class FlakyContainer:
    def __init__(self, engine: FlakyEngine, kwargs: dict[str, Any]) -> None:
        self.engine, self.kwargs, self.removed = engine, kwargs, False

    def start(self) -> None:
        import docker.errors
        import requests

        if self.engine.fails > 0:
            self.engine.fails -= 1
            response = requests.Response()
            response.status_code = self.engine.status
            raise docker.errors.APIError("cannot start a stopped process", response=response)

    def remove(self, force: bool = False) -> None:
        self.removed = True


def test_a_start_the_engine_fumbles_is_tried_again_with_a_fresh_container(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(docker_work.time, "sleep", lambda _: None)
    engine = FlakyEngine(fails=2)
    started = docker_work.start_container(engine, image="img")
    assert started is engine.created[-1] and len(engine.created) == 3
    assert [c.removed for c in engine.created] == [True, True, False]


def test_a_refused_container_is_not_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    import docker.errors

    monkeypatch.setattr(docker_work.time, "sleep", lambda _: None)
    engine = FlakyEngine(fails=1, status=400)
    with pytest.raises(docker.errors.APIError):
        docker_work.start_container(engine, image="img")
    assert len(engine.created) == 1 and engine.created[0].removed
    engine = FlakyEngine(fails=5)
    with pytest.raises(docker.errors.APIError):
        docker_work.start_container(engine, image="img")
    assert len(engine.created) == docker_work.START_ATTEMPTS
