"""Elle veri paralelliği: veriyi parçalara ayırın, gradyanların ortalamasını all_reduce ile alın, DDP yok.

Çalıştırma: torchrun --standalone --nproc-per-node 2 main.py
Şu anda her rank kendi parçasında eğitiliyor ve diğerleriyle hiç konuşmuyor; bu yüzden
kopyalar birbirinden uzaklaşıyor. İki TODO fonksiyonunu doldurun.
"""

import os

import torch
import torch.distributed as dist
import torch.nn as nn

EPOCHS = 2
BATCH_SIZE = 8  # süreç başına
NUM_SAMPLES = 240


def make_dataset() -> tuple[torch.Tensor, torch.Tensor]:
    # Her rank'te aynı sabit tohum: her süreç aynı veriyi oluşturur.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(NUM_SAMPLES, 10, generator=g)
    true_w = torch.randn(10, 1, generator=g)
    y = x @ true_w + 0.1 * torch.randn(NUM_SAMPLES, 1, generator=g)
    return x, y


def setup() -> torch.device:
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    dist.init_process_group(backend=backend)
    return device


def shard_indices(epoch: int, rank: int, world_size: int) -> torch.Tensor:
    """Her rank aynı permütasyonu çeker, sonra her world_size'ıncı indeksi tutar."""
    g = torch.Generator().manual_seed(epoch)
    order = torch.randperm(NUM_SAMPLES, generator=g)
    return order[rank::world_size]


def broadcast_parameters(model: nn.Module) -> None:
    """Her kopyayı rank 0'ın ağırlıklarından başlatın."""
    # TODO: her parametrenin rank 0'daki değerini diğer tüm rank'lere kopyalayın.


def average_gradients(model: nn.Module) -> None:
    """Her yerel gradyanı, o gradyanın tüm rank'ler üzerindeki ortalamasıyla değiştirin."""
    # TODO: her parametre için gradyanını tek bir kolektif işlemle tüm rank'ler üzerinde
    # yerinde toplayın, sonra toplamı ortalamaya çevirin. (Bu rank'te gradyanı olmayan bir
    # parametre önce sıfırlarla doldurulur; böylece her rank aynı çağrıları yapar.)


def in_sync(model: nn.Module) -> bool:
    """Bu rank'in ağırlıkları rank 0'ınkilere bit bit eşitse True."""
    mine = torch.cat([p.detach().flatten() for p in model.parameters()])
    theirs = mine.clone()
    dist.broadcast(theirs, src=0)
    return torch.equal(mine, theirs)


def train(device: torch.device) -> None:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    x, y = make_dataset()

    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    broadcast_parameters(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.MSELoss()

    for epoch in range(EPOCHS):
        mine = shard_indices(epoch, rank, world_size)
        for start in range(0, len(mine), BATCH_SIZE):
            idx = mine[start : start + BATCH_SIZE]
            xb, yb = x[idx].to(device), y[idx].to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            average_gradients(model)  # artık her rank aynı ortalama gradyanı tutuyor
            optimizer.step()
        print(f"rank {rank} epoch {epoch} last loss {loss.item():.4f}", flush=True)

    synced = in_sync(model)
    print(f"rank {rank} weights equal rank 0's: {synced}", flush=True)


def main() -> None:
    device = setup()
    try:
        train(device)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
