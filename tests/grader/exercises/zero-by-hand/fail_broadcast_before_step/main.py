"""ZeRO-1 with the broadcast placed before the local step: what each owner sends is the
value from before its update, so the other ranks never see it.

Run: torchrun --standalone --nproc-per-node 2 main.py
Each rank owns a share of the parameters: it keeps Adam's state for those only, steps them,
and sends the updated values to every other rank, so that all replicas stay equal.
"""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

EPOCHS = 2
BATCH_SIZE = 16  # per process


def make_dataset() -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 16, generator=g)
    true_w = torch.randn(16, 1, generator=g)
    y = x @ true_w + 0.1 * torch.randn(256, 1, generator=g)
    return TensorDataset(x, y)


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(16, 32),
        nn.ReLU(),
        nn.Linear(32, 32),
        nn.ReLU(),
        nn.Linear(32, 32),
        nn.ReLU(),
        nn.Linear(32, 32),
        nn.ReLU(),
        nn.Linear(32, 1),
    )


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


def assign_owners(params: list[nn.Parameter], world: int) -> list[int]:
    """Each parameter to the rank that holds the fewest elements so far (largest first)."""
    load = [0] * world
    owners = [0] * len(params)
    for i in sorted(range(len(params)), key=lambda i: -params[i].numel()):
        rank = min(range(world), key=lambda r: load[r])
        owners[i] = rank
        load[rank] += params[i].numel()
    return owners


def train(device: torch.device) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = make_model().to(device)
    ddp_model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)

    params = list(ddp_model.parameters())
    owners = assign_owners(params, world)
    mine = [p for p, owner in zip(params, owners, strict=True) if owner == rank]
    # Adam's moments for this rank's share only.
    optimizer = torch.optim.Adam(mine, lr=1e-2)

    dataset = make_dataset()
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler)
    loss_fn = nn.MSELoss()

    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            ddp_model.zero_grad(set_to_none=True)  # every gradient, not only this rank's share
            loss = loss_fn(ddp_model(x), y)
            loss.backward()  # DDP averages every gradient over the ranks
            with torch.no_grad():
                for p, owner in zip(params, owners, strict=True):
                    dist.broadcast(p, src=owner)  # the owner's values reach every rank
            optimizer.step()  # updates this rank's share only
        print(f"rank {rank} epoch {epoch} loss {loss.item():.4f}", flush=True)


def main() -> None:
    device = setup()
    try:
        train(device)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
