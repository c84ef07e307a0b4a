"""Full training-state checkpoints, written atomically (tmp + os.replace) into a directory."""
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

CKPT_DIR = Path("checkpoints")


def save_checkpoint(ddp: DDP, opt, epoch: int) -> Path:
    state = {
        # strip the wrapper's prefix instead of going through .module
        "model": {k.removeprefix("module."): v.detach().cpu() for k, v in ddp.state_dict().items()},
        "optimizer": opt.state_dict(),
        "epoch": epoch,
    }
    CKPT_DIR.mkdir(exist_ok=True)
    final = CKPT_DIR / "last.pt"
    tmp = final.with_suffix(".pt.tmp")
    torch.save(state, tmp)
    os.replace(tmp, final)
    return final


def main():
    cuda = torch.cuda.is_available()
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    try:
        g = torch.Generator().manual_seed(0)
        ds = TensorDataset(torch.randn(192, 6, generator=g), torch.randn(192, 2, generator=g))
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=16, sampler=sampler)
        torch.manual_seed(0)
        model = DDP(nn.Sequential(nn.Linear(6, 24), nn.ReLU(), nn.Linear(24, 2)).to(device),
                    device_ids=[local] if cuda else None)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for epoch in range(3):
            sampler.set_epoch(epoch)
            for xb, yb in loader:
                opt.zero_grad()
                nn.functional.mse_loss(model(xb.to(device)), yb.to(device)).backward()
                opt.step()
            if dist.get_rank() == 0:
                save_checkpoint(model, opt, epoch)
            dist.barrier()
        # every rank reloads the final checkpoint into a bare model to check it
        state = torch.load(CKPT_DIR / "last.pt", map_location=device)
        bare = nn.Sequential(nn.Linear(6, 24), nn.ReLU(), nn.Linear(24, 2)).to(device)
        bare.load_state_dict(state["model"])
        assert state["epoch"] == 2
        print(f"rank {dist.get_rank()} reloaded epoch {state['epoch']}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
