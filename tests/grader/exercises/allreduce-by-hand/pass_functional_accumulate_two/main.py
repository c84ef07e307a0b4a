"""Functional style, two accumulation micro-batches per step at any world size.

loss / ACCUM_STEPS over 2 micro-batches, then all_reduce(SUM) and a division by the world size:
the first update is the gradient of the mean over the whole global batch.
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F

ACCUM_STEPS = 2
MICRO = 6


def params() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    w1 = (torch.randn(5, 12, generator=g) * 0.3).requires_grad_()
    w2 = (torch.randn(12, 1, generator=g) * 0.3).requires_grad_()
    return [w1, w2]


def forward(ws: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x @ ws[0]) @ ws[1]


def sync_grads(ws: list[torch.Tensor]) -> None:
    world = dist.get_world_size()
    for w in ws:
        dist.all_reduce(w.grad)
        w.grad.div_(world)


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(42)
    x, y = torch.randn(96, 5, generator=g), torch.randn(96, 1, generator=g)
    ws = params()
    opt = torch.optim.SGD(ws, lr=0.1)
    per_step = MICRO * ACCUM_STEPS * world
    for start in range(0, len(x) - per_step + 1, per_step):
        opt.zero_grad()
        for k in range(ACCUM_STEPS):
            lo = start + (k * world + rank) * MICRO
            loss = F.mse_loss(forward(ws, x[lo : lo + MICRO]), y[lo : lo + MICRO])
            (loss / ACCUM_STEPS).backward()
        sync_grads(ws)
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
