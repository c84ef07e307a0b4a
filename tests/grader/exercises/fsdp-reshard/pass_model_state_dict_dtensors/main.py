"""model.state_dict() of DTensors and get_optimizer_state_dict in a plain dict; the step as a
tensor; reshard_after_forward=False (ZeRO-2-like); SGD with momentum."""

import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import (
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.fsdp import fully_shard

CKPT = "run/ckpt"
GLOBAL_BATCH = 12


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(16, 24), nn.Linear(24, 24)])
        self.head = nn.Linear(24, 1)

    def forward(self, x):
        for block in self.blocks:
            x = torch.tanh(block(x))
        return self.head(x)


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1)
    net = Net()
    for block in net.blocks:
        fully_shard(block, reshard_after_forward=False)
    fully_shard(net, reshard_after_forward=False)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    step = torch.tensor(0)
    if os.path.isdir(CKPT):
        state = {
            "net": net.state_dict(),
            "opt": get_optimizer_state_dict(net, opt),
            "step": step,
        }
        dcp.load(state, checkpoint_id=CKPT)
        net.load_state_dict(state["net"])
        set_optimizer_state_dict(net, opt, state["opt"])
        step = state["step"]
    for _ in range(3):
        g = torch.Generator().manual_seed(int(step))
        x = torch.randn(GLOBAL_BATCH, 16, generator=g)
        per = GLOBAL_BATCH // world
        x = x[rank * per : (rank + 1) * per]
        loss = (net(x) - x.mean(dim=1, keepdim=True)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        step += 1
    dcp.save(
        {"net": net.state_dict(), "opt": get_optimizer_state_dict(net, opt), "step": step},
        checkpoint_id=CKPT,
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
