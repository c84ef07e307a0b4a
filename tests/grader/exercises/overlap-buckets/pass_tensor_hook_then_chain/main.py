"""Bucketed all-reduce in the style of a DDP comm hook: each parameter's `Tensor.register_hook`
copies the gradient it is handed into its bucket's flat buffer; a full bucket goes out as
`all_reduce(...).get_future().then(divide)`, and the step waits on the chained futures.

Run: torchrun --standalone --nproc-per-node 2 main.py
"""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.futures import Future

STEPS = 8
BATCH_SIZE = 16
CAP = 40 * 1024


class Net(nn.Module):
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


class Bucket:
    def __init__(self, params: list[nn.Parameter]) -> None:
        self.params = params
        self.buffer = torch.zeros(sum(p.numel() for p in params), dtype=params[0].dtype)
        self.slots: dict[nn.Parameter, torch.Tensor] = {}
        offset = 0
        for p in params:
            self.slots[p] = self.buffer[offset : offset + p.numel()].view_as(p)
            offset += p.numel()
        self.filled: set[nn.Parameter] = set()
        self.future: Future | None = None


class CommHookReducer:
    def __init__(self, model: nn.Module, cap: int) -> None:
        self.world = dist.get_world_size()
        params = [p for p in model.parameters() if p.requires_grad]
        self.buckets: list[Bucket] = []
        group: list[nn.Parameter] = []
        used = 0
        for p in reversed(params):
            size = p.numel() * p.element_size()
            if group and used + size > cap:
                self.buckets.append(Bucket(group))
                group, used = [], 0
            group.append(p)
            used += size
        self.buckets.append(Bucket(group))
        self.home = {p: b for b in self.buckets for p in b.params}
        self.cursor = 0
        for p in params:
            p.register_hook(self._make_hook(p))

    def _make_hook(self, p: nn.Parameter):  # noqa: ANN202
        def hook(grad: torch.Tensor) -> None:
            bucket = self.home[p]
            bucket.slots[p].copy_(grad)
            bucket.filled.add(p)
            self._flush(during_backward=True)

        return hook

    def _flush(self, during_backward: bool) -> None:
        while self.cursor < len(self.buckets):
            bucket = self.buckets[self.cursor]
            if during_backward and len(bucket.filled) < len(bucket.params):
                return
            for p in bucket.params:
                if p not in bucket.filled:
                    bucket.slots[p].zero_()  # no gradient this step on this rank: zeros
            world = self.world
            bucket.future = (
                dist.all_reduce(bucket.buffer, async_op=True)
                .get_future()
                .then(lambda fut: fut.value()[0].div_(world))
            )
            self.cursor += 1

    def synchronize(self) -> None:
        self._flush(during_backward=False)
        for bucket in self.buckets:
            assert bucket.future is not None
            mean = bucket.future.wait()
            offset = 0
            for p in bucket.params:
                part = mean[offset : offset + p.numel()].view_as(p)
                p.grad = part.clone()
                offset += p.numel()
            bucket.filled.clear()
            bucket.future = None
        self.cursor = 0


def main() -> None:
    if torch.cuda.is_available():
        raise SystemExit("this variant is written for CPU")
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    try:
        torch.manual_seed(1234 + rank)
        model = Net()
        with torch.no_grad():
            for p in model.parameters():
                dist.broadcast(p, src=0)
        reducer = CommHookReducer(model, CAP)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        target = torch.randn(16, 4, generator=torch.Generator().manual_seed(0))
        for step in range(STEPS):
            x = torch.randn(BATCH_SIZE, 16)
            use_gate = step % (rank + 2) == 0
            optimizer.zero_grad(set_to_none=True)
            loss = nn.functional.mse_loss(model(x, use_gate), x @ target)
            loss.backward()
            reducer.synchronize()
            optimizer.step()
        flat = torch.cat([p.detach().flatten() for p in model.parameters()])
        ref = flat.clone()
        dist.broadcast(ref, src=0)
        print(f"rank {rank} in sync: {torch.equal(flat, ref)} checksum {flat.sum().item():.6f}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    assert "RANK" in os.environ
    main()
