"""A tiny language model (embedding, layer norm, MLP) with AdamW; each bucket is a persistent
flat buffer and the gradients become views into it after the all-reduce, as DDP's
gradient_as_bucket_view does; buckets from named_parameters()."""

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

VOCAB, DIM = 50, 64
CAP = 40 * 1024


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.ln = nn.LayerNorm(DIM)
        self.up = nn.Linear(DIM, 4 * DIM)
        self.down = nn.Linear(4 * DIM, DIM)
        self.out = nn.Linear(DIM, VOCAB)

    def forward(self, idx):
        h = self.tok(idx)
        h = h + self.down(F.gelu(self.up(self.ln(h))))
        return self.out(h)


class BucketViews:
    def __init__(self, model):
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.buckets = []
        group, size = [], 0
        for _, p in reversed(named):
            n = p.numel() * p.element_size()
            if group and size + n > CAP:
                self.buckets.append(group)
                group, size = [], 0
            group.append(p)
            size += n
        self.buckets.append(group)
        self.buffers = [torch.zeros(sum(p.numel() for p in b)) for b in self.buckets]
        self.offsets = {}
        for b, group in enumerate(self.buckets):
            off = 0
            for p in group:
                self.offsets[p] = (b, off)
                off += p.numel()
        self.count = [0] * len(self.buckets)
        self.launched = 0
        self.pending = []
        for _, p in named:
            p.register_post_accumulate_grad_hook(self.ready)

    def ready(self, p):
        b, off = self.offsets[p]
        self.buffers[b][off : off + p.numel()].copy_(p.grad.reshape(-1))
        self.count[b] += 1
        while self.launched < len(self.buckets) and self.count[self.launched] == len(self.buckets[self.launched]):
            self.pending.append(dist.all_reduce(self.buffers[self.launched], async_op=True))
            self.launched += 1

    def sync(self):
        for b in range(self.launched, len(self.buckets)):
            for p in self.buckets[b]:
                if p.grad is None:
                    bb, off = self.offsets[p]
                    self.buffers[bb][off : off + p.numel()].zero_()
            self.pending.append(dist.all_reduce(self.buffers[b], async_op=True))
        for w in self.pending:
            w.wait()
        world = dist.get_world_size()
        for b, group in enumerate(self.buckets):
            self.buffers[b].div_(world)
            for p in group:
                _, off = self.offsets[p]
                p.grad = self.buffers[b][off : off + p.numel()].view_as(p)
        self.pending, self.launched, self.count = [], 0, [0] * len(self.buckets)


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(11)
    model = TinyLM()
    for p in model.parameters():
        dist.broadcast(p.detach(), 0)
    views = BucketViews(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(500 + dist.get_rank())
    for it in range(5):
        idx = torch.randint(0, VOCAB, (4, 9), generator=g)
        logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), idx[:, 1:].reshape(-1))
        loss.backward()
        views.sync()
        opt.step()
        opt.zero_grad(set_to_none=False)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
