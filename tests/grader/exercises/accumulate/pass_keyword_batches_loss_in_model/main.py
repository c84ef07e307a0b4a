"""Correct, Hugging Face Trainer style: dict batches from a collate function, `model(**batch)`
returns a dict whose "loss" the model computed itself (a mean over the micro-batch), scaled by
1 / gradient_accumulation_steps; `no_sync` through an ExitStack on all but the last micro-batch."""

from contextlib import ExitStack

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Rows(Dataset):
    def __init__(self) -> None:
        g = torch.Generator().manual_seed(31)
        self.x = torch.randn(256, 10, generator=g)
        self.y = (self.x @ torch.randn(10, generator=g) > 0).long()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict:
        return {"pixel_values": self.x[i], "labels": self.y[i]}


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(10, 32), nn.GELU())
        self.head = nn.Linear(32, 2)

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor | None = None) -> dict:
        logits = self.head(self.encoder(pixel_values))
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = F.cross_entropy(logits, labels)
        return out


def collate(rows: list[dict]) -> dict:
    return {key: torch.stack([r[key] for r in rows]) for key in rows[0]}


def main() -> None:
    dist.init_process_group("gloo")
    args = {"gradient_accumulation_steps": 4, "per_device_train_batch_size": 8}
    data = Rows()
    sampler = DistributedSampler(data, seed=2)
    loader = DataLoader(
        data, batch_size=args["per_device_train_batch_size"], sampler=sampler, collate_fn=collate
    )
    torch.manual_seed(5)
    model = DDP(Classifier())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    steps = args["gradient_accumulation_steps"]
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for i, batch in enumerate(loader):
            boundary = (i + 1) % steps == 0
            with ExitStack() as stack:
                if not boundary:
                    stack.enter_context(model.no_sync())
                outputs = model(**batch)
                (outputs["loss"] / steps).backward()
            if boundary:
                optimizer.step()
                optimizer.zero_grad()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
