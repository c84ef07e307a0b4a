import logging
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

log = logging.getLogger("train")


def setup_logging(rank: int) -> None:
    logging.basicConfig(
        stream=sys.stdout,
        level=logging.INFO if rank == 0 else logging.WARNING,
        format=f"%(asctime)s [rank{rank}] %(levelname)s %(message)s",
    )


def main() -> int:
    cuda = torch.cuda.is_available()
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    setup_logging(dist.get_rank())
    try:
        g = torch.Generator().manual_seed(0)
        ds = TensorDataset(torch.randn(256, 10, generator=g), torch.randn(256, 1, generator=g))
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=16, sampler=sampler)
        model = DDP(nn.Linear(10, 1).to(device), device_ids=[local] if cuda else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for epoch in range(3):
            sampler.set_epoch(epoch)
            for step, (x, y) in enumerate(loader):
                opt.zero_grad()
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                opt.step()
                if step % 4 == 0:
                    log.info("epoch %d step %d loss %.4f", epoch, step, loss.item())
            if dist.get_rank() == 0:
                torch.save(model.module.state_dict(), "checkpoint.pt")
                log.info("saved checkpoint")
            dist.barrier()
        return 0
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
