"""Correct: a 30-line script, everything at module level."""
import os, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

dist.init_process_group(backend="gloo")
rank = int(os.environ["RANK"])
torch.manual_seed(1234)
data = TensorDataset(torch.randn(200, 4), torch.randint(0, 3, (200,)))
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=20, sampler=sampler)
net = DDP(torch.nn.Linear(4, 3))
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
lossf = torch.nn.CrossEntropyLoss()
for ep in range(2):
    sampler.set_epoch(ep)
    for xb, yb in loader:
        opt.zero_grad()
        lossf(net(xb), yb).backward()
        opt.step()
if rank == 0:
    torch.save(net.module.state_dict(), "net.pt")
dist.barrier()
dist.destroy_process_group()
