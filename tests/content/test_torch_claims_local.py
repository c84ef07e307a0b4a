"""What the lessons say torch 2.13 does, for claims that need no torchrun launch: they run in this
process (no process group), in one short child process, or read torch's own source where the
behaviour needs a GPU (NCCL) that the test machines do not have. Each test names the step that
makes the claim; when one fails after a torch upgrade, revisit that step.
"""

from __future__ import annotations

import inspect
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d
from torch.utils.data import DataLoader, DistributedSampler, Subset

pytestmark = pytest.mark.slow


# --- lesson 2, init-process-group and quiz cpu-backend (W1 of the 2026-12-07 review) ---------


def test_init_without_a_backend_creates_only_the_accelerators_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`init_process_group()` with no backend builds `BackendConfig(Backend.UNDEFINED)`. In torch
    2.13 (`torch/distributed/distributed_c10d.py:419-431`, `BackendConfig.__init__`, since
    PR #142216) that maps only the device type `torch._C._get_accelerator()` reports to its
    default backend; the comment at `:2074` reads "when backend is UNDEFINED, only one backend
    will be initialized". So a GPU machine gets `cuda:nccl` alone and a CPU tensor finds no
    backend there. The GPU case is simulated by reporting CUDA as the accelerator."""
    source = inspect.getsource(c10d.BackendConfig.__init__)
    assert "if backend == Backend.UNDEFINED:" in source
    assert "device_type = torch._C._get_accelerator().type" in source
    assert "self.device_backend_map[device_type] = Backend(backend_str)" in source
    assert "only one backend will be initialized" in inspect.getsource(c10d)

    assert str(c10d.BackendConfig(c10d.Backend.UNDEFINED)) == "cpu:gloo"  # this CPU machine
    monkeypatch.setattr(torch._C, "_get_accelerator", lambda: torch.device("cuda"))
    assert str(c10d.BackendConfig(c10d.Backend.UNDEFINED)) == "cuda:nccl"
    # The forms the lesson teaches instead: the pair, and gloo alone on a CPU machine.
    assert str(c10d.BackendConfig("cpu:gloo,cuda:nccl")) == "cpu:gloo,cuda:nccl"
    assert str(c10d.BackendConfig("gloo")) == "cpu:gloo,cuda:gloo"
    assert str(c10d.BackendConfig("nccl")) == "cuda:nccl"


PAIR = """
import torch, torch.distributed as dist
try:
    dist.init_process_group("cpu:gloo,cuda:nccl", store=dist.HashStore(), rank=0, world_size=1)
    print("config", dist.get_backend_config(), flush=True)
except RuntimeError as exc:
    print("refused:", exc, flush=True)
"""


def test_the_backend_pair_needs_a_torch_built_with_nccl(tmp_path: Path) -> None:
    """Lesson 2: `backend="cpu:gloo,cuda:nccl"` works on a torch built with NCCL and is refused
    by a CPU-only build, which is why the step picks it only when CUDA is there."""
    (tmp_path / "pair.py").write_text(PAIR)
    done = subprocess.run(
        [sys.executable, "pair.py"],
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    if dist.is_nccl_available():
        assert "config cpu:gloo,cuda:nccl" in done.stdout, done.stdout + done.stderr
    else:
        assert "refused: Distributed package doesn't have NCCL built in" in done.stdout, (
            done.stdout + done.stderr
        )


# --- lesson 1, ddp-names and quiz predict-buckets (W2, M2) ----------------------------------


def test_ddp_closes_a_bucket_once_it_reaches_the_cap() -> None:
    """DDP adds a gradient, then closes the bucket once it reaches the limit: on the quiz's sizes
    (ready order 2, 30, 4, 40, 4 KB, cap 40 KB) it makes 2 buckets, the first 76 KB; the
    exercise's rule (never over the cap) makes 3."""
    kb = 1024 // 4  # float32 elements per KB
    grads = [torch.empty(size * kb) for size in (2, 30, 4, 40, 4)]
    buckets, _ = dist._compute_bucket_assignment_by_size(grads, [40 * 1024], [False] * 5)
    assert buckets == [[0, 1, 2, 3], [4]]
    assert dist._DEFAULT_FIRST_BUCKET_BYTES == 1024 * 1024


def test_ddp_uses_one_bucket_for_the_first_iteration_unless_it_looks_for_unused_parameters() -> (
    None
):
    """`distributed.py` (`_BucketCapacityConfig.compute_bucket_size_limits`, used at `:1410-1440`):
    by default (and with `static_graph=True`) the initial assignment has no limit, one bucket for
    everything, rebuilt after the first iteration in the observed order; with
    `find_unused_parameters=True` the initial buckets follow the parameter order and the reducer
    never rebuilds them (run under torchrun in test_torch_claims.py)."""
    from torch.nn.parallel.distributed import _BucketCapacityConfig

    config = _BucketCapacityConfig.create(None, None, use_python_reducer=False)
    assert config.first_bucket_bytes_cap == 1024 * 1024
    assert config.compute_bucket_size_limits(False, False)[0] == [sys.maxsize]
    assert config.compute_bucket_size_limits(True, False)[0] == [sys.maxsize]
    assert config.compute_bucket_size_limits(False, True)[0] == [1024 * 1024, 25 * 1024 * 1024]
    # The initial buckets group the parameters in their order; the reducer gets the list reversed.
    from torch.nn.parallel import DistributedDataParallel as DDP

    init = " ".join(inspect.getsource(DDP._ddp_init_helper).split())
    assert "dist._compute_bucket_assignment_by_size( parameters, bucket_size_limits," in init
    assert "list(reversed(bucket_indices))" in init


def test_the_1_mib_first_bucket_needs_bucket_cap_mb_unset() -> None:
    """Lesson 1, ddp-names: `_BucketCapacityConfig.create` (torch 2.13 `distributed.py:104-110`)
    keeps the 1 MiB first bucket only while `bucket_cap_mb` is None; passing 25 yourself makes the
    first bucket 25 MiB too. With `find_unused_parameters=True` the 1 MiB group holds the first
    parameters, and the reversed list sends it last (a torchrun run printed initial buckets
    3145728, 1048576 for eight 512 KiB parameters)."""
    from torch.nn.parallel.distributed import _BucketCapacityConfig

    unset = _BucketCapacityConfig.create(None, None, use_python_reducer=False)
    given = _BucketCapacityConfig.create(25, None, use_python_reducer=False)
    assert unset.first_bucket_bytes_cap == 1024 * 1024
    assert given.first_bucket_bytes_cap == given.bucket_bytes_cap == 25 * 1024 * 1024
    assert given.compute_bucket_size_limits(False, True)[0] == [25 * 1024 * 1024]
    kb = 1024 // 4
    grads = [torch.empty(512 * kb) for _ in range(8)]
    buckets, _ = dist._compute_bucket_assignment_by_size(
        grads, [1024 * 1024, 25 * 1024 * 1024], [False] * 8
    )
    assert buckets[0] == [0, 1]  # the first parameters form the 1 MiB group
    assert list(reversed(buckets))[-1] == [0, 1]  # ...which the reducer gets last


# --- lesson 1, async-handles and quiz wait-in-hook (I3) -------------------------------------


def test_work_wait_blocks_the_cuda_stream_on_nccl_not_the_cpu() -> None:
    """On NCCL `Work.wait()` makes the current CUDA stream wait and returns to the CPU; only a
    timeout makes it block the CPU thread (torch 2.13's own docstring of `Work.wait`)."""
    doc = " ".join((dist.distributed_c10d.Work.wait.__doc__ or "").split())
    assert "Letting the current stream block on the completion of the NCCL work" in doc
    assert "if timeout is set, it will block the CPU thread" in doc


# --- lesson 2, accumulate-gradients (I2) and mixed-precision (I4) ---------------------------


def test_an_accumulation_tail_steps_with_r_over_k_of_its_mean_gradient() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    batches = [torch.randn(4, 3) for _ in range(3)]  # r = 3 micro-batches left, k = 4
    for x in batches:
        (model(x).pow(2).mean() / 4).backward()
    tail = model.weight.grad.clone()
    model.zero_grad()
    (sum(model(x).pow(2).mean() for x in batches) / 3).backward()
    mean = model.weight.grad.clone()
    assert torch.allclose(tail, mean * 3 / 4, atol=1e-6)


def test_grad_scaler_starts_at_65536() -> None:
    default = inspect.signature(torch.amp.GradScaler.__init__).parameters["init_scale"].default
    assert default == 2.0**16 == 65536


# --- lesson 3, zero-stages (I8) -------------------------------------------------------------


def test_fsdp2_without_reshard_after_forward_still_reshards_after_backward() -> None:
    """`reshard_after_forward=False` keeps the parameters gathered from forward to the end of
    backward, and FSDP2 still frees them after backward (`reshard_after_backward` defaults to
    True): close to ZeRO-2, not DeepSpeed's. With the flag left out, the root is not resharded
    after forward (`_fsdp_state.py`, `_lazy_init`)."""
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup
    from torch.distributed.fsdp._fully_shard._fsdp_state import FSDPState

    doc = " ".join((fully_shard.__doc__ or "").split())
    assert "keeps the unsharded parameters in memory after forward and avoids the all-gather" in (
        doc
    )
    assert "self.reshard_after_backward: bool = True" in inspect.getsource(FSDPParamGroup.__init__)
    post_backward = inspect.getsource(FSDPParamGroup.post_backward)
    assert "if self.reshard_after_backward:" in post_backward and "self.reshard()" in post_backward
    # Lesson 3, zero-stages: the default is None, True on every module but the root.
    assert inspect.signature(fully_shard).parameters["reshard_after_forward"].default is None
    assert "If ``None``, it is set to ``True`` for non-root modules and ``False`` for root" in doc
    lazy_init = inspect.getsource(FSDPState._lazy_init)
    assert "if self._auto_reshard_after_forward:" in lazy_init
    assert "post_forward_mesh_info = None" in lazy_init


# --- lesson 4, snapshots (M3) and uneven-inputs (W3) ----------------------------------------


def test_numpy_rng_state_loads_as_tensor_and_ints_and_a_seed_does_not_resume(
    tmp_path: Path,
) -> None:
    legacy = np.random.RandomState(7)
    legacy.random_sample(5)  # the stream has moved on
    name, keys, pos, has_gauss, gauss = legacy.get_state()
    generator = np.random.default_rng(7)
    generator.random(5)
    path = tmp_path / "snapshot.pt"
    torch.save(
        {
            "np_legacy": (name, torch.from_numpy(keys.copy()), pos, has_gauss, gauss),
            "np_generator": generator.bit_generator.state,
            "py": random.getstate(),
        },
        path,
    )
    loaded = torch.load(path, weights_only=True)
    name, keys, pos, has_gauss, gauss = loaded["np_legacy"]
    resumed = np.random.RandomState()
    resumed.set_state((name, keys.numpy(), pos, has_gauss, gauss))
    assert resumed.random_sample(3).tolist() == legacy.random_sample(3).tolist()
    again = np.random.default_rng()
    again.bit_generator.state = loaded["np_generator"]
    assert again.random(3).tolist() == generator.random(3).tolist()
    # A seed restarts the stream: it replays the first numbers, not the next ones.
    assert np.random.RandomState(7).random_sample(3).tolist() != resumed.random_sample(3).tolist()

    torch.save({"np": np.random.get_state()}, path)
    with pytest.raises(Exception, match="Weights only load failed"):
        torch.load(path, weights_only=True)


def test_dataloader_drop_last_does_not_equalise_strided_shards() -> None:
    """23 samples, 2 ranks, strided shards of 12 and 11, batches of 4: `DataLoader(drop_last=True)`
    gives 3 and 2 batches; `DistributedSampler(drop_last=True)` and hand-cut equal shards give
    every rank the same count."""
    data = list(range(23))
    strided = [len(DataLoader(Subset(data, range(r, 23, 2)), 4, drop_last=True)) for r in (0, 1)]
    assert strided == [3, 2]
    sampled = [
        len(DataLoader(data, 4, sampler=DistributedSampler(data, 2, r, False, drop_last=True)))
        for r in (0, 1)
    ]
    assert sampled == [3, 3]  # 11 samples each
    per = len(data) // 2
    cut = [len(DataLoader(Subset(data, range(r * per, (r + 1) * per)), 4)) for r in (0, 1)]
    assert cut[0] == cut[1]


def test_ddp_join_divides_by_the_initial_world_size_and_warns_about_other_collectives() -> None:
    """Lesson 4 (uneven-inputs): `Join` broadcasts the last joined rank's model at the end, the
    sum is divided by the initial world size by default, and collectives DDP does not know
    (SyncBatchNorm's) need `throw_on_early_termination=True` (DDP.join's signature and docstring
    in torch 2.13). The Adam divergence itself runs in test_torch_claims.py."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    parameters = inspect.signature(DDP.join).parameters
    assert parameters["divide_by_initial_world_size"].default is True
    assert parameters["throw_on_early_termination"].default is False
    doc = " ".join((DDP.join.__doc__ or "").split())
    assert "broadcast the model corresponding to the last joined process" in doc
    assert "``SyncBatchNorm`` in the model's forward pass, then the flag" in doc
    assert "``throw_on_early_termination`` must be enabled" in doc
