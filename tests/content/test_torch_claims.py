"""What the lessons say torch 2.13 does under torchrun, run for real with short timeouts.

Lesson 4 and the env-launch exercise claim: a hard-coded `init_method="tcp://..."` or
`MASTER_PORT` makes even a single worker time out connecting to a store (since 2.4 the workers
only connect to the store torchrun's rendezvous shares with them), and restarts work with
`TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`. Lessons 1 to 4 also claim how a hang shows (a timeout that
names no collective, or "Connection closed by peer" when the other rank has exited), which debug
tools work on gloo (INFO names unused parameters; DETAIL segfaults DDP's construction in 2.13;
`monitored_barrier` needs a gloo group), what `init_process_group()` without a backend gives,
that BatchNorm statistics differ per rank after training, what `Join` keeps equal (the
weights, not Adam's state), when DDP builds and rebuilds its buckets, that a SyncBatchNorm
conversion after wrapping is in place, and how bf16 autocast and GradScaler's `unscale_` behave
under DDP. When a test here fails after a torch upgrade, revisit the step it names. These tests
launch torchrun (run them through `heavy`); the claims that need no launch, or a GPU, are in
test_torch_claims_local.py.
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


# --- lessons 2 and 4: debugging a DDP program -----------------------------------------------

TINY_DDP = """
import torch, torch.distributed as dist
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.head_a = nn.Linear(4, 1)
        self.head_b = nn.Linear(4, 1)  # never used in forward

    def forward(self, x):
        return self.head_a(self.body(x))

dist.init_process_group()
ddp = nn.parallel.DistributedDataParallel(Net())
print("built", flush=True)
for step in range(2):
    try:
        ddp(torch.randn(2, 4)).sum().backward()
    except RuntimeError as exc:
        if dist.get_rank() == 0:
            print(f"step {step}: {exc}", flush=True)
        break
dist.destroy_process_group()
"""


def test_debug_detail_crashes_ddp_on_gloo_and_info_names_the_unused_parameters(
    tmp_path: Path,
) -> None:
    """Lessons 2 and 4 name unused parameters with INFO and warn that DETAIL segfaults DDP's
    construction on gloo in torch 2.13 (revisit both steps when this test fails)."""
    detail = _torchrun(
        tmp_path, TINY_DDP, "--nproc-per-node", "2", env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}
    )
    output = detail.stdout + detail.stderr
    assert detail.returncode != 0, output
    assert "built" not in detail.stdout
    assert "SIGSEGV" in output

    info = _torchrun(
        tmp_path, TINY_DDP, "--nproc-per-node", "2", env={"TORCH_DISTRIBUTED_DEBUG": "INFO"}
    )
    output = info.stdout + info.stderr
    # The error comes in the next iteration, naming the parameters; without INFO only indices.
    assert "step 1: Expected to have finished reduction in the prior iteration" in output
    assert "Parameters which did not receive grad for rank 0: head_b.bias, head_b.weight" in output
    off = _torchrun(tmp_path, TINY_DDP, "--nproc-per-node", "2")
    output = off.stdout + off.stderr
    assert "Parameter indices which did not receive grad for rank 0: 4 5" in output
    assert "head_b.weight" not in output


def test_monitored_barrier_names_the_late_rank_on_a_gloo_group(tmp_path: Path) -> None:
    done = _torchrun(
        tmp_path,
        """
        import datetime, time, torch.distributed as dist
        dist.init_process_group(timeout=datetime.timedelta(seconds=30))
        try:  # the default group of init_process_group() without a backend is refused
            dist.monitored_barrier(timeout=datetime.timedelta(seconds=2))
        except ValueError as exc:
            print(f"rank {dist.get_rank()} default group: {exc}", flush=True)
        watch = dist.new_group(backend="gloo")
        if dist.get_rank() == 1:
            time.sleep(6)
        try:
            dist.monitored_barrier(group=watch, timeout=datetime.timedelta(seconds=2))
        except RuntimeError as exc:
            print(f"rank {dist.get_rank()} watch: {str(exc).splitlines()[0]}", flush=True)
        """,
        "--nproc-per-node",
        "2",
    )
    output = done.stdout + done.stderr
    assert "rank 0 default group: monitored_barrier is only implemented for GLOO backend" in output
    assert "rank 0 watch: [Rank 0]: Rank 1 failed to pass monitoredBarrier in 2000 ms" in output


SKIPPED_COLLECTIVE = """
import datetime, time, torch, torch.distributed as dist
dist.init_process_group(timeout=datetime.timedelta(seconds={timeout}))
if dist.get_rank() == 0:
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(1))  # rank 1 never calls it
    except RuntimeError as exc:
        print(f"failed after {{time.monotonic() - start:.0f}}s: {{exc}}", flush=True)
else:
    time.sleep({rank_1_lives})  # 0: rank 1 finishes and exits at once
"""


def test_a_skipped_collective_times_out_or_fails_at_once(tmp_path: Path) -> None:
    """Lesson 1 and 2: a collective one rank skips waits for the timeout while the other rank
    lives on (gloo's message names no collective), and fails at once, as if a worker crashed,
    when the other rank has already exited."""
    waits = _torchrun(
        tmp_path, SKIPPED_COLLECTIVE.format(timeout=3, rank_1_lives=8), "--nproc-per-node", "2"
    )
    output = waits.stdout + waits.stderr
    assert "Timed out waiting 3000ms for recv operation to complete" in output
    assert "all_reduce" not in output.split("failed after", 1)[1].splitlines()[0]
    exits = _torchrun(
        tmp_path, SKIPPED_COLLECTIVE.format(timeout=60, rank_1_lives=0), "--nproc-per-node", "2"
    )
    output = exits.stdout + exits.stderr
    assert "Connection closed by peer" in output
    assert "typically caused by a remote worker crashing" in output
    assert "failed after" in output and "Timed out" not in output


# --- lessons 2 and 3: devices, evaluation, BatchNorm, mixed precision ------------------------

PRACTICE = """
import torch, torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group()  # no backend: only the accelerator's (here the CPU's, gloo)
rank, world = dist.get_rank(), dist.get_world_size()

def say(*parts):
    if rank == 0:
        print(*parts, flush=True)

def same_on_all(tensor):
    gathered = [torch.empty_like(tensor) for _ in range(world)]
    dist.all_gather(gathered, tensor)
    return all(torch.equal(gathered[0], other) for other in gathered)

say("config", dist.get_backend_config(), "nccl", dist.is_nccl_available())
total = torch.ones(1)
dist.all_reduce(total)
say("cpu all_reduce", total.item())
cuda_only = dist.new_group(backend="cuda:gloo")  # what an NCCL-only group is to a CPU tensor
try:
    dist.all_reduce(torch.ones(1), group=cuda_only)
except RuntimeError as exc:
    say("cuda-only group:", exc)

# BatchNorm under DDP: each rank's running statistics after training.
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 1))
ddp = DDP(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
torch.manual_seed(1 + rank)
for _ in range(3):
    opt.zero_grad()
    ddp(torch.randn(16, 4) * (rank + 1)).pow(2).mean().backward()
    opt.step()
say("bn equal after training:", same_on_all(model[1].running_mean))
for buffer in model.buffers():
    dist.broadcast(buffer, src=0)
say("bn equal after broadcasting the buffers:", same_on_all(model[1].running_mean))

# SyncBatchNorm conversion after wrapping: in place, and DDP's forward runs the new layer.
converted = nn.SyncBatchNorm.convert_sync_batchnorm(ddp.module)
say("converted in place:", converted is ddp.module, type(ddp.module[1]).__name__)
try:
    ddp(torch.randn(4, 4))
except ValueError as exc:
    say("forward after late conversion:", exc)

# bf16 autocast on CPU under DDP: bf16 activations, fp32 gradients, averaged as usual.
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
ddp_bf16 = DDP(net)
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = ddp_bf16(torch.randn(8, 4) * (rank + 1))
out.float().pow(2).mean().backward()
say("bf16:", out.dtype, net[0].weight.grad.dtype, same_on_all(net[0].weight.grad))

# fp16-style loss scaling: DDP averages the scaled gradients, unscale_ divides them back, and
# clipping after unscale_ sees the true norm.
torch.manual_seed(0)
ref = nn.Linear(4, 1)
torch.manual_seed(0)
scaled = nn.Linear(4, 1)
ddp_ref, ddp_scaled = DDP(ref), DDP(scaled)
x = torch.randn(8, 4) * (rank + 1)
ddp_ref(x).pow(2).mean().backward()
true_norm = torch.nn.utils.clip_grad_norm_(ref.parameters(), float("inf")).item()
optimizer = torch.optim.SGD(ddp_scaled.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
scaler.scale(ddp_scaled(x).pow(2).mean()).backward()
say(f"scaled/true before unscale_: {(scaled.weight.grad / ref.weight.grad).mean().item():.1f}")
scaler.unscale_(optimizer)
say("unscaled equals the average:", torch.allclose(scaled.weight.grad, ref.weight.grad))
norm = torch.nn.utils.clip_grad_norm_(scaled.parameters(), 1.0).item()
say("true norm after unscale_:", abs(norm - true_norm) <= 1e-5 * max(1.0, true_norm))
scaler.step(optimizer)
scaler.update()
dist.destroy_process_group()
"""


def test_device_evaluation_batchnorm_and_mixed_precision_claims(tmp_path: Path) -> None:
    """Lesson 2 (init without a backend, evaluation, mixed precision) and lesson 3 (BatchNorm
    buffers, converting after wrapping), in one 2-process run."""
    done = _torchrun(tmp_path, PRACTICE, "--nproc-per-node", "2")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    # init_process_group() without a backend on a machine without an accelerator: gloo for CPU
    # tensors and nothing else (the GPU case: test_torch_claims_local.py).
    assert "config cpu:gloo nccl" in output
    assert "cpu all_reduce 2.0" in output
    # An NCCL-only group refuses a CPU tensor: move the counts to the device.
    assert "cuda-only group: No backend type associated with device type cpu" in output
    # After training, rank 1's inner-model BatchNorm statistics differ from rank 0's.
    assert "bn equal after training: False" in output
    assert "bn equal after broadcasting the buffers: True" in output
    # Late conversion is in place and DDP's forward runs the converted layer.
    assert "converted in place: True SyncBatchNorm" in output
    assert "forward after late conversion: SyncBatchNorm expected input tensor to be on GPU" in (
        output
    )
    assert "bf16: torch.bfloat16 torch.float32 True" in output
    assert "scaled/true before unscale_: 1024.0" in output
    assert "unscaled equals the average: True" in output
    assert "true norm after unscale_: True" in output


def test_rng_states_a_weights_only_load_accepts(tmp_path: Path) -> None:
    """Lesson 4: torch's and Python's RNG states load with weights_only=True."""
    import random

    import torch

    path = tmp_path / "snapshot.pt"
    torch.save({"torch_rng": torch.get_rng_state(), "py_rng": random.getstate()}, path)
    loaded = torch.load(path, weights_only=True)
    assert torch.equal(loaded["torch_rng"], torch.get_rng_state())
    assert tuple(loaded["py_rng"][1]) == random.getstate()[1]


UNEVEN = """
import torch, torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed.algorithms.join import Join

dist.init_process_group("gloo")
rank = dist.get_rank()

def say(*parts):
    if rank == 0:
        print(*parts, flush=True)

def same_on_all(tensor):
    gathered = [torch.empty_like(tensor) for _ in range(2)]
    dist.all_gather(gathered, tensor)
    return torch.equal(gathered[0], gathered[1])

def buckets(**options):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.Linear(512, 10))
    ddp = DDP(net, bucket_cap_mb=0.5, **options)
    sizes = lambda: [b.buffer().numel() for b in ddp.reducer._get_zeros_like_grad_buckets()]
    first = sizes()
    for _ in range(3):
        ddp(torch.randn(4, 256)).sum().backward()
    return len(first), len(sizes()), ddp._get_ddp_logging_data().get("has_rebuilt_buckets")

say("buckets default:", *buckets())
say("buckets find_unused:", *buckets(find_unused_parameters=True))

torch.manual_seed(0)
model = nn.Linear(4, 2)
ddp = DDP(model)
optimizer = torch.optim.Adam(ddp.parameters(), lr=0.1)
torch.manual_seed(1 + rank)
with Join([ddp]):
    for _ in range(3 if rank == 0 else 5):
        optimizer.zero_grad()
        ddp(torch.randn(8, 4)).pow(2).mean().backward()
        optimizer.step()
say("join weights equal:", same_on_all(model.weight.detach()))
steps = torch.tensor([float(optimizer.state[model.weight]["step"])])
say("adam steps equal:", same_on_all(steps))
optimizer.zero_grad()
ddp(torch.randn(8, 4)).pow(2).mean().backward()
optimizer.step()
say("weights equal after the next synced step:", same_on_all(model.weight.detach()))

# Two different calls of the same size pair up: rank 0's metric meets rank 1's other all-reduce.
metric = torch.full((2,), 1.0 if rank == 0 else 10.0)
if rank == 0:
    dist.all_reduce(metric)  # the metric
else:
    dist.all_reduce(metric)  # some other collective, elsewhere in the code
say("same size paired:", metric.tolist())

# Lesson 4's quiz find-the-hang: rank 0 in the metric's all-reduce, rank 1 at a barrier: both wait.
import datetime
side = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=3))
try:
    if rank == 0:
        dist.all_reduce(torch.ones(1), group=side)
    else:
        dist.barrier(group=side)
    say("all_reduce met a barrier")
except RuntimeError as exc:
    say("all_reduce vs barrier:", str(exc).splitlines()[0])
dist.destroy_process_group()
"""


def test_join_keeps_weights_not_adam_state_and_when_ddp_rebuilds_buckets(tmp_path: Path) -> None:
    """Lesson 4 (uneven-inputs): after `Join`, the weights are equal but the rank that joined
    early skipped Adam steps, and one more synchronised step makes the replicas differ; two
    mismatched calls of the same size pair silently, and an all-reduce facing a barrier waits
    (quiz find-the-hang). Lesson 1 (ddp-names): by default DDP starts
    with one bucket and rebuilds after the first iteration; with `find_unused_parameters=True`
    it keeps its initial buckets."""
    done = _torchrun(tmp_path, UNEVEN, "--nproc-per-node", "2")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "buckets default: 1 2 1" in output  # one bucket, then rebuilt
    assert "buckets find_unused: 3 3 0" in output  # never rebuilt
    assert "join weights equal: True" in output
    assert "adam steps equal: False" in output
    assert "weights equal after the next synced step: False" in output
    assert "same size paired: [11.0, 11.0]" in output
    assert "all_reduce vs barrier:" in output and "Timed out waiting 3000ms" in output
