"""Plain functions and closures; torch._utils flattening; gradients pre-divided by the world
size before the all-reduce; Adam; a model built with nn.Sequential."""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

CAP = 40 * 1024


def attach_overlap(model, cap):
    world = dist.get_world_size()
    order = list(reversed([p for p in model.parameters()]))
    buckets, cur, size = [], [], 0
    for p in order:
        nbytes = p.numel() * p.element_size()
        if cur and size + nbytes > cap:
            buckets.append(cur)
            cur, size = [], 0
        cur.append(p)
        size += nbytes
    buckets.append(cur)
    where = {id(p): i for i, b in enumerate(buckets) for p in b}
    state = {"left": [len(b) for b in buckets], "next": 0, "flight": []}

    def launch(i):
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in buckets[i]]
        flat = _flatten_dense_tensors(grads).div_(world)  # the mean: divide first, then sum
        state["flight"].append((i, flat, dist.all_reduce(flat, async_op=True)))
        state["next"] = i + 1

    def ready(p):
        state["left"][where[id(p)]] -= 1
        while state["next"] < len(buckets) and state["left"][state["next"]] == 0:
            launch(state["next"])

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(ready)

    def wait_all():
        while state["next"] < len(buckets):
            launch(state["next"])
        for i, flat, work in state["flight"]:
            work.wait()
            for p, mean in zip(buckets[i], _unflatten_dense_tensors(flat, buckets[i])):
                p.grad = mean
        state["flight"] = []
        state["left"] = [len(b) for b in buckets]
        state["next"] = 0

    return wait_all


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 96), nn.Tanh(), nn.Linear(96, 96), nn.Tanh(), nn.Linear(96, 3))
    with torch.no_grad():
        for p in model.parameters():
            dist.broadcast(p, 0)
    sync = attach_overlap(model, CAP)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(100 + rank)
    try:
        for step in range(6):
            x = torch.randn(12, 20, generator=gen)
            y = torch.randint(0, 3, (12,), generator=gen)
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            sync()
            opt.step()
        print("rank", rank, "done", os.getpid() > 0)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
