"""Buckets sent as one async all-reduce per tensor, all issued together when the bucket is
complete, in place on p.grad (not one all-reduce of the flattened bucket: a bug); handles kept
in a list; the exercise's model with its gate."""

import torch
import torch.distributed as dist
import torch.nn as nn

CAP_BYTES = 40 * 1024


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(16, 64)
        self.gate = nn.Linear(16, 64)
        self.body = nn.Sequential(nn.ReLU(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU())
        self.head = nn.Linear(128, 4)

    def forward(self, x, use_gate):
        h = self.embed(x)
        if use_gate:
            h = h * torch.sigmoid(self.gate(x))
        return self.head(self.body(h))


class Reducer:
    def __init__(self, params, cap):
        self.params = list(params)
        self.buckets = []
        cur, size = [], 0
        for p in self.params[::-1]:
            b = p.numel() * p.element_size()
            if cur and size + b > cap:
                self.buckets.append(cur)
                cur, size = [], 0
            cur.append(p)
            size += b
        self.buckets.append(cur)
        self.index = {p: i for i, bucket in enumerate(self.buckets) for p in bucket}
        self.reset()
        for p in self.params:
            p.register_post_accumulate_grad_hook(self.on_grad)

    def reset(self):
        self.seen = [0] * len(self.buckets)
        self.sent = 0
        self.handles = []

    def send(self, i):
        for p in self.buckets[i]:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            self.handles.append((p, dist.all_reduce(p.grad, async_op=True)))
        self.sent = i + 1

    def on_grad(self, p):
        self.seen[self.index[p]] += 1
        while self.sent < len(self.buckets) and self.seen[self.sent] == len(self.buckets[self.sent]):
            self.send(self.sent)

    def synchronize(self):
        while self.sent < len(self.buckets):
            self.send(self.sent)
        world = dist.get_world_size()
        for p, handle in self.handles:
            handle.wait()
            p.grad /= world
        self.reset()


def main():
    dist.init_process_group(backend="gloo")
    rank = dist.get_rank()
    torch.manual_seed(7)
    model = Net()
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
    reducer = Reducer(model.parameters(), CAP_BYTES)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for step in range(5):
        x = torch.randn(8, 16) + rank
        loss = model(x, use_gate=(step + rank) % 2 == 0).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        reducer.synchronize()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
