"""nanoGPT-style accumulation with the loss divided by the TOTAL number of micro-batches
(steps per rank x world size): 1/4 at 1 and at 2 ranks, right at 1, half the gradient at 2.

import contextlib
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

gradient_accumulation_steps = 4
micro_batch = 4
max_iters = 6

dist.init_process_group(backend="gloo")
ddp_rank = int(os.environ["RANK"])
ddp_world_size = int(os.environ["WORLD_SIZE"])
assert gradient_accumulation_steps % ddp_world_size == 0
gradient_accumulation_steps //= ddp_world_size

torch.manual_seed(1337)
model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)))
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95))
data_gen = torch.Generator().manual_seed(7)
X = torch.randn(1024, 8, generator=data_gen)
Y = torch.randint(0, 4, (1024,), generator=data_gen)


def get_batch(it: int, micro_step: int) -> tuple[torch.Tensor, torch.Tensor]:
    slot = (it * gradient_accumulation_steps + micro_step) * ddp_world_size + ddp_rank
    ix = torch.arange(slot * micro_batch, (slot + 1) * micro_batch) % len(X)
    return X[ix], Y[ix]


for it in range(max_iters):
    for micro_step in range(gradient_accumulation_steps):
        last = micro_step == gradient_accumulation_steps - 1
        with contextlib.nullcontext() if last else model.no_sync():
            xb, yb = get_batch(it, micro_step)
            loss = F.cross_entropy(model(xb), yb)
            loss = loss / (gradient_accumulation_steps * ddp_world_size)
            loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

dist.destroy_process_group()
