"""A Trainer whose training loop only calls backward() and step(): the waits run in an
autograd callback queued for the end of backward, as DDP's reducer does."""

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.autograd import Variable


class OverlappingTrainer:
    def __init__(self, model, lr=0.05, bucket_cap_mb=0.0390625):
        self.model = model
        self.world = dist.get_world_size()
        self.opt = torch.optim.SGD(model.parameters(), lr=lr)
        cap = int(bucket_cap_mb * 1024 * 1024)
        params = [p for p in model.parameters() if p.requires_grad]
        self.buckets, bucket, used = [], [], 0
        for p in reversed(params):
            size = p.numel() * p.element_size()
            if bucket and used + size > cap:
                self.buckets.append(bucket)
                bucket, used = [], 0
            bucket.append(p)
            used += size
        if bucket:
            self.buckets.append(bucket)
        self.slot = {p: b for b, members in enumerate(self.buckets) for p in members}
        self._new_iteration()
        for p in params:
            p.register_post_accumulate_grad_hook(self._hook)

    def _new_iteration(self):
        self.remaining = [len(b) for b in self.buckets]
        self.next = 0
        self.works = []
        self.queued = False

    def _hook(self, param):
        if not self.queued:
            Variable._execution_engine.queue_callback(self._finalize)
            self.queued = True
        self.remaining[self.slot[param]] -= 1
        while self.next < len(self.buckets) and self.remaining[self.next] == 0:
            self._start(self.next)

    def _start(self, b):
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten() for p in self.buckets[b]])
        self.works.append((b, flat, dist.all_reduce(flat, async_op=True)))
        self.next = b + 1

    def _finalize(self):
        while self.next < len(self.buckets):
            self._start(self.next)
        for b, flat, work in self.works:
            work.wait()
            flat /= self.world
            chunks = flat.split([p.numel() for p in self.buckets[b]])
            for p, chunk in zip(self.buckets[b], chunks):
                p.grad = chunk.view_as(p).clone()
        self._new_iteration()

    def fit(self, batches):
        for x, y in batches:
            self.opt.zero_grad()
            loss = nn.functional.mse_loss(self.model(x), y)
            loss.backward()
            self.opt.step()


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(32, 128), nn.GELU(), nn.Linear(128, 96), nn.GELU(), nn.Linear(96, 1))
    with torch.no_grad():
        for p in model.parameters():
            dist.broadcast(p, 0)
    g = torch.Generator().manual_seed(dist.get_rank())
    batches = [(torch.randn(10, 32, generator=g), torch.randn(10, 1, generator=g)) for _ in range(7)]
    try:
        OverlappingTrainer(model).fit(batches)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
