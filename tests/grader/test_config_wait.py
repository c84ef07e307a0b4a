"""A prepared sandbox's supervisor waits for its job's config (grader/inside/config_wait.py):
woken by the file arriving, whether renamed into place (bwrap's host) or written in place in
pieces (Docker's archive API), and by polling where inotify is missing."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from grader.inside import config_wait

CONFIG = {"nonce": "n", "world_size": 2, "env": {}}


def later(action: object, delay: float = 0.3) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(delay), action()))  # type: ignore[operator]
    thread.start()
    return thread


def test_a_config_renamed_into_place_wakes_the_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No look now and then: only the file's arrival can end this wait before its deadline."""
    monkeypatch.setattr(config_wait, "RESCAN_S", 3600.0)
    assert config_wait.watch(tmp_path) is not None  # this kernel offers inotify

    def drop() -> None:
        staged = tmp_path.parent / f"{tmp_path.name}-staged.json"
        staged.write_text(json.dumps(CONFIG))
        os.replace(staged, tmp_path / ".rdv-config-ab.json")

    writer = later(drop)
    assert config_wait.wait_for_config(120, tmp_path) == tmp_path / ".rdv-config-ab.json"
    writer.join()


def test_a_config_written_in_place_is_taken_once_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config_wait, "RESCAN_S", 3600.0)
    whole = json.dumps(CONFIG)
    target = tmp_path / ".rdv-config-cd.json"
    target.write_text(whole[: len(whole) // 2])  # as the archive API leaves it mid-write
    writer = later(lambda: target.write_text(whole))
    assert config_wait.wait_for_config(120, tmp_path) == target
    writer.join()


def test_without_inotify_the_wait_polls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_wait, "watch", lambda job_dir: None)
    writer = later(lambda: (tmp_path / ".rdv-config-ef.json").write_text(json.dumps(CONFIG)))
    assert config_wait.wait_for_config(120, tmp_path) == tmp_path / ".rdv-config-ef.json"
    writer.join()


def test_no_config_before_the_deadline_is_none(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("")
    assert config_wait.wait_for_config(0.2, tmp_path) is None
