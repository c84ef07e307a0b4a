"""Correct: an exact token-weighted mean over the whole global window. Each rank counts the real
(unpadded) targets of its 4 micro-batches, the counts are summed over the ranks with all_reduce,
and each micro-batch's masked sum of per-token losses is divided by that global count and
multiplied by the world size (DDP's average over the ranks takes the world size back off)."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

K, VOCAB, T, PAD = 4, 13, 7, -100


def micro_batch(step: int, m: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(97 * step + 7 * m + 1000 * rank)
    x = torch.randint(0, VOCAB, (5, T), generator=g)
    y = torch.randint(0, VOCAB, (5, T), generator=g)
    keep = torch.rand(5, T, generator=g) < 0.3 + 0.15 * rank  # ranks hold different counts
    return x, torch.where(keep, y, torch.full_like(y, PAD))


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Embedding(VOCAB, 12), nn.Linear(12, VOCAB)))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for step in range(5):
        window = [micro_batch(step, m, rank) for m in range(K)]
        count = torch.tensor(float(sum(int((y != PAD).sum()) for _, y in window)))
        dist.all_reduce(count)  # real targets in the window, over all ranks
        for m, (x, y) in enumerate(window):
            model.require_backward_grad_sync = m == K - 1
            logits = model(x)
            per_token = F.cross_entropy(
                logits.view(-1, VOCAB), y.view(-1), ignore_index=PAD, reduction="none"
            )
            (per_token.sum() / count * world).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
