"""Correct, nanoGPT-like: a tiny next-token model on padded sequences. The per-token losses come
from cross_entropy(reduction="none"); padding is masked out and every micro-batch's masked sum is
divided by the number of real tokens in the whole window (a token-weighted mean). A manual loop
with gradient_accumulation_steps and `model.require_backward_grad_sync`."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, T = 11, 9
gradient_accumulation_steps = 4


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 16)
        self.head = nn.Linear(16, VOCAB)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.emb(idx)))


def get_batch(step: int, micro: int, rank: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * step + 10 * micro + rank)
    tokens = torch.randint(0, VOCAB, (6, T + 1), generator=g)
    lengths = torch.randint(3, T + 1, (6,), generator=g)  # uneven: padded at the end
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
    return tokens[:, :-1], tokens[:, 1:], mask


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(TinyLM())
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    for it in range(6):
        window = [get_batch(it, m, rank) for m in range(gradient_accumulation_steps)]
        real_tokens = sum(float(mask.sum()) for _, _, mask in window)
        for micro_step, (x, y, mask) in enumerate(window):
            model.require_backward_grad_sync = micro_step == gradient_accumulation_steps - 1
            logits = model(x)
            per_token = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1), reduction="none")
            loss = (per_token * mask.reshape(-1)).sum() / real_tokens
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
