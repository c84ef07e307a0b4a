"""Bucketed all-reduce where only the first bucket overlaps backward: the others are launched
after backward() returns, in finish() (a bug: they were ready long before).

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
    """Group the parameters in the order their gradients become ready (the reverse of the
    forward): a new bucket starts when the next gradient would take this one over the cap."""
    buckets: list[list[nn.Parameter]] = []
    current: list[nn.Parameter] = []
    size = 0
    for p in reversed(params):
        nbytes = p.numel() * p.element_size()
        if current and size + nbytes > cap_bytes:
            buckets.append(current)
            current, size = [], 0
        current.append(p)
        size += nbytes
    if current:
        buckets.append(current)
    return buckets


class GradientOverlap:
    """All-reduces each bucket as soon as all its gradients are ready, while backward goes on."""

    def __init__(self, model: nn.Module, cap_bytes: int) -> None:
        self.world_size = dist.get_world_size()
        params = [p for p in model.parameters() if p.requires_grad]
        self.buckets = make_buckets(params, cap_bytes)
        self.bucket_of = {p: b for b, bucket in enumerate(self.buckets) for p in bucket}
        self.pending = [len(bucket) for bucket in self.buckets]
        self.next_bucket = 0  # buckets go out in order, the same order on every rank
        self.in_flight: list[tuple[int, torch.Tensor, dist.Work]] = []
        for p in params:
            p.register_post_accumulate_grad_hook(self._grad_ready)

    def _grad_ready(self, p: torch.Tensor) -> None:
        self.pending[self.bucket_of[p]] -= 1
        # Only the first bucket is launched from the hook; the others wait for finish().
        if self.next_bucket == 0 and self.pending[0] == 0:
            self._launch(0)

    def _launch(self, b: int) -> None:
        # A parameter with no gradient this step still takes part, as zeros: every rank sends
        # buckets of the same sizes in the same order.
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.buckets[b]]
        flat = torch.cat([g.reshape(-1) for g in grads])
        work = dist.all_reduce(flat, op=dist.ReduceOp.SUM, async_op=True)
        self.in_flight.append((b, flat, work))
        self.next_bucket = b + 1

    def finish(self) -> None:
        """Call after backward(), before optimizer.step(): launch what is left, wait for every
        bucket and write the means back into .grad."""
        while self.next_bucket < len(self.buckets):
            self._launch(self.next_bucket)
        for b, flat, work in self.in_flight:
            work.wait()
            flat.div_(self.world_size)
            offset = 0
            for p in self.buckets[b]:
                mean = flat[offset : offset + p.numel()].view_as(p)
                if p.grad is None:
                    p.grad = mean.clone()
                else:
                    p.grad.copy_(mean)
                offset += p.numel()
        self.in_flight.clear()
        self.pending = [len(bucket) for bucket in self.buckets]
        self.next_bucket = 0


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
