"""device.pinned, right: each rank takes the GPU of its LOCAL_RANK (CPU and gloo without one)."""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("cpu:gloo,cuda:nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    model = DDP(
        torch.nn.Linear(8, 2).to(device),
        device_ids=[local_rank] if device.type == "cuda" else None,
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = model(torch.randn(4, 8, device=device)).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
