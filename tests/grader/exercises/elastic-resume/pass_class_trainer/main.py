"""The tutorial's Trainer, with the snapshot holding the epochs already run (fixed off-by-one)."""

import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Trainer:
    def __init__(self, snapshot_path: str) -> None:
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.global_rank = int(os.environ["RANK"])
        torch.manual_seed(0)
        model = torch.nn.Linear(10, 1)
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
        self.epochs_run = 0
        self.snapshot_path = snapshot_path
        if os.path.exists(snapshot_path):
            self._load_snapshot()
        self.model = DDP(model)
        g = torch.Generator().manual_seed(0)
        data = TensorDataset(torch.randn(64, 10, generator=g), torch.randn(64, 1, generator=g))
        self.sampler = DistributedSampler(data)
        self.loader = DataLoader(data, batch_size=16, sampler=self.sampler)

    def _load_snapshot(self) -> None:
        snapshot = torch.load(self.snapshot_path, map_location="cpu")
        self.model_state = snapshot["MODEL_STATE"]
        self.optimizer.load_state_dict(snapshot["OPTIMIZER_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        params = self.optimizer.param_groups[0]["params"]
        with torch.no_grad():
            for p, v in zip(params, self.model_state.values(), strict=True):
                p.copy_(v)
        print(f"Resuming training from snapshot at epoch {self.epochs_run}", flush=True)

    def _save_snapshot(self, epoch: int) -> None:
        snapshot = {
            "MODEL_STATE": self.model.module.state_dict(),
            "OPTIMIZER_STATE": self.optimizer.state_dict(),
            "EPOCHS_RUN": epoch + 1,
        }
        torch.save(snapshot, self.snapshot_path)

    def train(self, max_epochs: int) -> None:
        for epoch in range(self.epochs_run, max_epochs):
            self.sampler.set_epoch(epoch)
            for source, targets in self.loader:
                self.optimizer.zero_grad()
                F.mse_loss(self.model(source), targets).backward()
                self.optimizer.step()
            if self.global_rank == 0:
                self._save_snapshot(epoch)
            dist.barrier()


def main() -> None:
    dist.init_process_group(backend="gloo")
    try:
        Trainer("snapshot.pt").train(4)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
