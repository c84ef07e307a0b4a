"""Overlapped, bucketed gradient all-reduce by hand: what DDP does inside backward().

Run: torchrun --standalone --nproc-per-node 2 main.py
"""

import os

import torch
import torch.distributed as dist
import torch.nn as nn

STEPS = 8
BATCH_SIZE = 16  # per process
BUCKET_CAP_BYTES = 40 * 1024  # a bucket holds at most this many bytes of gradients


class Net(nn.Module):
    """A small MLP with a gated input: some batches skip the gate (as a route of a mixture of
    experts would), so on those batches `gate` gets no gradient."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(16, 64)
        self.gate = nn.Linear(16, 64)
        self.body = nn.Sequential(
            nn.ReLU(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU()
        )
        self.head = nn.Linear(128, 4)

    def forward(self, x: torch.Tensor, use_gate: bool) -> torch.Tensor:
        h = self.embed(x)
        if use_gate:
            h = h * torch.sigmoid(self.gate(x))
        return self.head(self.body(h))


def setup() -> torch.device:
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    dist.init_process_group(backend=backend)
    return device


def broadcast_parameters(model: nn.Module) -> None:
    """Start every replica from rank 0's weights."""
    with torch.no_grad():
        for p in model.parameters():
            dist.broadcast(p, src=0)


def make_buckets(params: list[nn.Parameter], cap_bytes: int) -> list[list[nn.Parameter]]:
    """TODO: group the parameters in the order their gradients become ready (the reverse of the
    forward); start a new bucket when the next gradient would take this one over the cap."""
    return [[p] for p in params]


class GradientOverlap:
    """TODO: all-reduce each bucket as soon as all its gradients are ready, while backward goes
    on, and wait for every bucket in `finish()`.

    For now it does what `allreduce-by-hand` did: nothing during backward, then one synchronous
    all-reduce per parameter in `finish()`. Correct, but every byte waits for the end of
    backward, and every parameter pays the all-reduce's latency.
    """

    def __init__(self, model: nn.Module, cap_bytes: int) -> None:
        self.world_size = dist.get_world_size()
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.buckets = make_buckets(self.params, cap_bytes)
        # TODO: register a hook on every parameter that runs when its gradient is ready:
        # p.register_post_accumulate_grad_hook(self._grad_ready)

    def _grad_ready(self, p: torch.Tensor) -> None:
        """TODO: count the ready gradients of p's bucket; when the bucket is complete, launch
        `dist.all_reduce(..., async_op=True)` on its flattened gradients and keep the handle.
        Launch buckets in bucket order, so that every rank sends the same bucket at the same
        time."""

    def finish(self) -> None:
        """Call after backward(), before optimizer.step()."""
        for p in self.params:
            if p.grad is None:  # no gradient on this rank this step: send zeros
                p.grad = torch.zeros_like(p)
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad.div_(self.world_size)


def in_sync(model: nn.Module) -> bool:
    """True when this rank's weights equal rank 0's, bit for bit."""
    mine = torch.cat([p.detach().flatten() for p in model.parameters()])
    theirs = mine.clone()
    dist.broadcast(theirs, src=0)
    return torch.equal(mine, theirs)


def train(device: torch.device) -> None:
    rank = dist.get_rank()
    torch.manual_seed(1234 + rank)  # each rank draws its own batches
    model = Net().to(device)
    broadcast_parameters(model)
    overlap = GradientOverlap(model, BUCKET_CAP_BYTES)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    target = torch.randn(16, 4, generator=torch.Generator().manual_seed(0)).to(device)

    for step in range(STEPS):
        x = torch.randn(BATCH_SIZE, 16, device=device)
        y = x @ target
        use_gate = step % (rank + 2) == 0  # differs between ranks from the second step on
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(model(x, use_gate), y)
        loss.backward()  # buckets are all-reduced during this call
        overlap.finish()
        optimizer.step()
        print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)

    synced = in_sync(model)
    print(f"rank {rank} weights equal rank 0's: {synced}", flush=True)
    if not synced:
        raise RuntimeError(f"rank {rank} drifted away from rank 0")


def main() -> None:
    device = setup()
    try:
        train(device)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
