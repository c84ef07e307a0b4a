"""What the lessons say torch 2.13 does under torchrun, run for real with short timeouts.

Lesson 4 and the env-launch exercise claim: a hard-coded `init_method="tcp://..."` or
`MASTER_PORT` makes even a single worker time out connecting to a store (since 2.4 the workers
only connect to the store torchrun's rendezvous shares with them), and restarts work with
`TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`. These tests launch torchrun (run them through `heavy`).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _torchrun(
    tmp_path: Path, script: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "main.py").write_text(textwrap.dedent(script))
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", *args, "main.py"]
    return subprocess.run(
        command,
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_hard_coded_tcp_init_method_times_out_even_with_one_worker(tmp_path: Path) -> None:
    port = _free_port()
    done = _torchrun(
        tmp_path,
        f"""
        import datetime, os
        import torch.distributed as dist
        print("agent store shared:", os.environ.get("TORCHELASTIC_USE_AGENT_STORE"), flush=True)
        dist.init_process_group(
            "gloo", init_method="tcp://127.0.0.1:{port}", rank=0, world_size=1,
            timeout=datetime.timedelta(seconds=3),
        )
        print("joined", flush=True)
        """,
        "--nproc-per-node",
        "1",
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "agent store shared: True" in output
    assert "joined" not in output
    assert "client socket has timed out" in output
    assert f"connect to (127.0.0.1, {port})" in output


def test_setting_master_port_in_code_times_out_on_its_own(tmp_path: Path) -> None:
    port = _free_port()
    done = _torchrun(
        tmp_path,
        f"""
        import datetime, os
        import torch.distributed as dist
        os.environ["MASTER_PORT"] = "{port}"
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=3))
        print("joined", flush=True)
        """,
        "--nproc-per-node",
        "1",
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "joined" not in output
    assert "client socket has timed out" in output
    # --standalone exports MASTER_ADDR=localhost: the worker tries the port the code set.
    assert f"connect to (localhost, {port})" in output


def test_a_restart_resumes_with_the_opt_out_variable(tmp_path: Path) -> None:
    done = _torchrun(
        tmp_path,
        """
        import datetime, os
        import torch, torch.distributed as dist
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
        attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
        t = torch.ones(1)
        dist.all_reduce(t)
        print(f"attempt {attempt} rank {dist.get_rank()} sum {t.item():.0f}", flush=True)
        if attempt == "0" and dist.get_rank() == 1:
            os._exit(1)
        dist.barrier()
        dist.destroy_process_group()
        """,
        "--nproc-per-node",
        "2",
        "--max-restarts",
        "1",
        env={"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"},
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "attempt 0 rank 1 sum 2" in output
    assert "attempt 1 rank 0 sum 2" in output and "attempt 1 rank 1 sum 2" in output
