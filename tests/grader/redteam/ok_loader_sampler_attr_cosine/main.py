import os

import torch
import torch.distributed as dist
from torch import nn, optim
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

EPOCHS = 3


def get_loader(rank: int, world: int) -> DataLoader:
    g = torch.Generator().manual_seed(2024)
    x = torch.randn(300, 12, generator=g)
    y = (x[:, 0] * x[:, 1] > 0).long()
    ds = TensorDataset(x, y)
    return DataLoader(
        ds,
        batch_size=32,
        sampler=DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=42),
        drop_last=False,
    )


def main() -> None:
    local_rank = int(os.environ["LOCAL_RANK"])
    on_gpu = torch.cuda.is_available()
    if on_gpu:
        torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank) if on_gpu else torch.device("cpu")
    dist.init_process_group(backend="nccl" if on_gpu else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        train_loader = get_loader(rank, world)
        model = nn.Sequential(nn.Linear(12, 64), nn.ReLU(), nn.Linear(64, 2)).to(device)
        model = DDP(model, device_ids=[local_rank] if on_gpu else None)
        optimizer = optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
        scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=EPOCHS * len(train_loader))
        criterion = nn.CrossEntropyLoss()
        for epoch in range(EPOCHS):
            train_loader.sampler.set_epoch(epoch)
            model.train()
            correct = 0
            for inputs, labels in train_loader:
                inputs, labels = inputs.to(device), labels.to(device)
                optimizer.zero_grad()
                logits = model(inputs)
                loss = criterion(logits, labels)
                loss.backward()
                optimizer.step()
                scheduler.step()
                correct += (logits.argmax(1) == labels).sum().item()
            if rank == 0:
                print(f"epoch {epoch} lr {scheduler.get_last_lr()[0]:.5f} acc(rank0 shard) {correct}")
        if rank == 0:
            torch.save(model.module.state_dict(), "classifier.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
