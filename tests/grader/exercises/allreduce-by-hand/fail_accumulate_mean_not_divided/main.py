"""A Trainer that accumulates 2 micro-batches with loss / accum_steps, then all-reduces the
gradients with SUM and never divides by the world size: every step is world_size times too big."""

import torch
import torch.distributed as dist
from torch import nn


class Trainer:
    def __init__(self, accum_steps: int = 2, micro: int = 8) -> None:
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        torch.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
        for p in self.model.parameters():
            dist.broadcast(p.data, 0)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self.accum_steps, self.micro = accum_steps, micro
        g = torch.Generator().manual_seed(9)
        self.x, self.y = torch.randn(128, 4, generator=g), torch.randn(128, 1, generator=g)

    def micro_batches(self, step: int):
        base = step * self.micro * self.accum_steps * self.world
        for k in range(self.accum_steps):
            lo = base + (k * self.world + self.rank) * self.micro
            yield self.x[lo : lo + self.micro], self.y[lo : lo + self.micro]

    def train_step(self, step: int) -> None:
        self.opt.zero_grad()
        for xb, yb in self.micro_batches(step):
            loss = nn.functional.mse_loss(self.model(xb), yb) / self.accum_steps
            loss.backward()
        for p in self.model.parameters():
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
        self.opt.step()


def main() -> None:
    dist.init_process_group("gloo")
    trainer = Trainer()
    for step in range(4):
        trainer.train_step(step)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
