"""Paralelismo de dados à mão: divida os dados, tire a média dos gradientes com all_reduce, sem DDP.

Execução: torchrun --standalone --nproc-per-node 2 main.py
Agora cada rank treina na sua própria fatia e nunca fala com os outros, então as
réplicas se afastam. Preencha as duas funções com TODO.
"""

import os

import torch
import torch.distributed as dist
import torch.nn as nn

EPOCHS = 2
BATCH_SIZE = 8  # por processo
NUM_SAMPLES = 240


def make_dataset() -> tuple[torch.Tensor, torch.Tensor]:
    # A mesma semente fixa em todo rank: todo processo constrói os mesmos dados.
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
    """Todo rank sorteia a mesma permutação e fica com um índice a cada world_size."""
    g = torch.Generator().manual_seed(epoch)
    order = torch.randperm(NUM_SAMPLES, generator=g)
    return order[rank::world_size]


def broadcast_parameters(model: nn.Module) -> None:
    """Comece toda réplica a partir dos pesos do rank 0."""
    # TODO: copie o valor de cada parâmetro no rank 0 para todos os outros ranks.


def average_gradients(model: nn.Module) -> None:
    """Substitua cada gradiente local pela média desse gradiente sobre todos os ranks."""
    # TODO: para cada parâmetro, some o gradiente sobre todos os ranks no lugar com uma
    # coletiva, depois transforme a soma em média. (Um parâmetro sem gradiente neste rank
    # recebe zeros antes, para que todo rank faça as mesmas chamadas.)


def in_sync(model: nn.Module) -> bool:
    """True quando os pesos deste rank são iguais aos do rank 0, bit a bit."""
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
            average_gradients(model)  # agora todo rank tem o mesmo gradiente médio
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
