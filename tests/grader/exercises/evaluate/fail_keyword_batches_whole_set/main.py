"""Bug: keyword-argument batches (`model(features=..., mask=...)`), but every rank evaluates the
whole test set (no sampler) and the all_reduce then counts every sample world_size times, divided
back by the world size: the number is right, the work is done world_size times over."""

import torch
import torch.distributed as dist
import torch.nn as nn


class MaskedMean(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.score = nn.Linear(4, 3)

    def forward(self, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        pooled = (features * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        return self.score(pooled)


def main() -> None:
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(21)
    features = torch.randn(400, 7, 4, generator=g)
    mask = (torch.rand(400, 7, generator=g) > 0.3).float()
    labels = torch.randint(0, 3, (400,), generator=g)
    torch.manual_seed(1)
    model = MaskedMean().eval()
    hits = torch.zeros(1)
    with torch.no_grad():
        for i in range(0, 400, 25):
            inputs = {"features": features[i : i + 25], "mask": mask[i : i + 25]}
            hits += (model(**inputs).argmax(-1) == labels[i : i + 25]).sum()
    dist.all_reduce(hits)
    if dist.get_rank() == 0:
        print(f"accuracy={hits.item() / dist.get_world_size() / 400}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
