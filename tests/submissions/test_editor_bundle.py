"""The committed editor bundle is exactly what its pinned sources build (needs npm)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from app.config import REPO_ROOT


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed (CI has it)")
def test_committed_bundle_matches_a_fresh_build() -> None:
    check = subprocess.run(
        [str(REPO_ROOT / "scripts" / "check-editor-bundle.sh")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_lockfile_pins_every_dependency() -> None:
    import json

    package = json.loads((REPO_ROOT / "static/editor-src/package.json").read_text())
    lock = json.loads((REPO_ROOT / "static/editor-src/package-lock.json").read_text())
    for name, version in package["devDependencies"].items():
        assert version[0].isdigit(), f"{name} is not pinned to an exact version"
        assert lock["packages"][f"node_modules/{name}"]["version"] == version
