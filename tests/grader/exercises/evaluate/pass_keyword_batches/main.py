"""Correct, in the style of a Hugging Face evaluation loop: the collate function returns a dict,
the model takes keyword arguments (`model(**batch)`), and the ranks' (index, hit) pairs are merged
by index, which drops the sampler's padded repeats."""

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, DistributedSampler

N_TEST = 707  # a prime: the sampler pads every shard at 2 and 3 ranks


class Pairs(Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.features = torch.randn(n, 6, generator=g)
        self.labels = (self.features[:, :3].sum(dim=1) > 0).long()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict:
        return {"index": i, "input_ids": self.features[i], "labels": self.labels[i]}


def collate(rows: list[dict]) -> dict:
    return {
        "index": torch.tensor([r["index"] for r in rows]),
        "input_ids": torch.stack([r["input_ids"] for r in rows]),
        "labels": torch.stack([r["labels"] for r in rows]),
    }


class Scorer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2))

    def forward(self, *, input_ids: torch.Tensor, labels: torch.Tensor | None = None) -> dict:
        logits = self.body(input_ids)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = nn.functional.cross_entropy(logits, labels)
        return out


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(3)
    model = Scorer().eval()
    data = Pairs(N_TEST, seed=11)
    sampler = DistributedSampler(data, shuffle=False)
    loader = DataLoader(data, batch_size=50, sampler=sampler, collate_fn=collate)
    hits: dict[int, bool] = {}
    with torch.inference_mode():
        for batch in loader:
            index = batch.pop("index")
            logits = model(**batch)["logits"]
            right = logits.argmax(dim=-1) == batch["labels"]
            hits.update(zip(index.tolist(), right.tolist()))  # a padded repeat lands on itself
    every: list[dict[int, bool]] = [{} for _ in range(dist.get_world_size())]
    dist.all_gather_object(every, hits)
    merged = {i: ok for part in every for i, ok in part.items()}
    if dist.get_rank() == 0:
        print(f"accuracy={sum(merged.values()) / len(merged)}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
