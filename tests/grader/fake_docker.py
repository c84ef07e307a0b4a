"""A small fake of the Docker engine for the warm Docker sandbox's unit tests: volumes held in
memory, holder containers that speak the archive API (tar streams), and sandbox containers whose
"supervisor" says READY, waits for a whole config in its volume, takes it (as
`grader.inside.config_wait` does), writes a report and exits. The real engine runs in
`make scale-test`."""

from __future__ import annotations

import io
import itertools
import json
import tarfile
import threading
from collections.abc import Iterator
from typing import Any

from grader.launch.wire import READY

_ids = itertools.count(1)


class FakeVolume:
    def __init__(self, labels: dict[str, str]) -> None:
        self.name = f"vol{next(_ids)}"
        self.labels = labels
        self.files: dict[str, bytes] = {}
        self.changed = threading.Condition()
        self.removed = False

    def remove(self, force: bool = False) -> None:
        self.removed = True


class FakeContainer:
    def __init__(self, engine: FakeEngine, kwargs: dict[str, Any]) -> None:
        self.engine, self.kwargs = engine, kwargs
        self.id = f"{next(_ids):064x}"
        self.labels: dict[str, str] = kwargs.get("labels", {})
        mounts = list(kwargs.get("volumes", {}))
        self.volume = engine.volumes.by_name[mounts[0]] if mounts else None
        self.done = threading.Event()
        self.code = 0
        self.removed = False
        self.took_job = False
        self.attrs: dict[str, Any] = {"State": {"Running": False, "OOMKilled": False}}

    @property
    def is_holder(self) -> bool:
        return bool(self.kwargs.get("entrypoint") == ["sleep"])

    def start(self) -> None:
        self.engine.started.append(self)
        self.attrs["State"].update(Running=True, Status="running")

    def stop(self, code: int) -> None:
        self.code = code
        self.attrs["State"].update(Running=False, Status="exited", ExitCode=code)

    # -- the archive API (holders) ----------------------------------------------------------
    def put_archive(self, path: str, data: bytes) -> bool:
        assert self.is_holder and path == "/work" and self.volume is not None
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar:  # extracted in order, each file written in place
                source = tar.extractfile(member)
                content = source.read() if source else b""
                with self.volume.changed:
                    self.volume.files[member.name] = content
                    self.volume.changed.notify_all()
        return True

    def get_archive(self, path: str) -> tuple[Iterator[bytes], dict[str, Any]]:
        import docker.errors

        assert self.is_holder and self.volume is not None
        name = path.removeprefix("/work").strip("/")
        files = self.volume.files
        if name and name not in files:
            raise docker.errors.NotFound(f"no {path}")
        wanted = [name] if name else sorted(files)
        data = io.BytesIO()
        with tarfile.open(fileobj=data, mode="w") as tar:
            if not name:
                tar.addfile(_dir("work"))
            for key in wanted:
                info = tarfile.TarInfo(f"work/{key}" if not name else key)
                info.size = len(files[key])
                tar.addfile(info, io.BytesIO(files[key]))
        return iter([data.getvalue()]), {}

    # -- a sandbox container running the supervisor -----------------------------------------
    def logs(self, stream: bool = False, follow: bool = False) -> Iterator[bytes]:
        assert not self.is_holder and self.volume is not None
        yield b"supervisor starting\n"
        behaviour = self.engine.behaviour
        if behaviour == "dies":
            self.stop(1)
            self.done.set()
            return
        yield (READY + "\n").encode()
        config = self._wait_for_config()
        if config is None or behaviour == "ends-before-job":
            self.stop(0)
            self.done.set()
            return
        name, cfg = config
        self.took_job = True
        with self.volume.changed:
            del self.volume.files[name]
            self.volume.files[f".rdv-report-{cfg['nonce']}.json"] = b'{"ranks": []}'
        yield b"rank 0 says hello\n"
        if behaviour == "holder-stops":
            # The holder ended mid-job: when the sandbox exits nothing holds the tmpfs, the engine
            # unmounts it, and a copy out of the stopped holder sees a fresh, empty one.
            [holder] = [c for c in self.engine.holders() if c.volume is self.volume]
            holder.stop(137)
            with self.volume.changed:
                self.volume.files.clear()
        self.stop(0)
        self.done.set()

    def _wait_for_config(self) -> tuple[str, dict[str, Any]] | None:
        assert self.volume is not None
        with self.volume.changed:
            while not (self.removed or self.engine.behaviour == "ends-before-job"):
                for name, content in sorted(self.volume.files.items()):
                    if name.startswith(".rdv-config-"):
                        try:
                            return name, json.loads(content)
                        except ValueError:
                            pass  # not whole yet
                self.volume.changed.wait(0.05)
        return None

    def wait(self, timeout: float | None = None) -> dict[str, int]:
        self.done.wait(timeout)
        return {"StatusCode": self.code}

    def kill(self) -> None:
        self.stop(137)
        self.done.set()

    def reload(self) -> None:
        pass

    def remove(self, force: bool = False) -> None:
        self.removed = True
        self.attrs["State"].update(Running=False, Status="removing")
        self.done.set()
        if self.volume is not None:
            with self.volume.changed:
                self.volume.changed.notify_all()


class _Volumes:
    def __init__(self) -> None:
        self.by_name: dict[str, FakeVolume] = {}

    def create(self, driver: str, driver_opts: dict[str, str], labels: dict[str, str]) -> Any:
        volume = FakeVolume(labels)
        self.by_name[volume.name] = volume
        return volume

    def get(self, name: str) -> FakeVolume:
        return self.by_name[name]


class _Containers:
    def __init__(self, engine: FakeEngine) -> None:
        self.engine = engine
        self.created: list[FakeContainer] = []

    def create(self, **kwargs: Any) -> FakeContainer:
        container = FakeContainer(self.engine, kwargs)
        self.created.append(container)
        return container

    def get(self, ident: str) -> FakeContainer:
        return next(c for c in self.created if c.id == ident)


class FakeEngine:
    """`behaviour`: "serves" (default), "dies" (before READY), "ends-before-job" (READY, then
    exits without taking a config), "holder-stops" (serves, but the work volume's holder stops
    during the launch)."""

    def __init__(self, behaviour: str = "serves") -> None:
        self.behaviour = behaviour
        self.volumes = _Volumes()
        self.containers = _Containers(self)
        self.started: list[FakeContainer] = []

    def sandboxes(self) -> list[FakeContainer]:
        return [c for c in self.containers.created if not c.is_holder]

    def holders(self) -> list[FakeContainer]:
        return [c for c in self.containers.created if c.is_holder]


def _dir(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    return info
