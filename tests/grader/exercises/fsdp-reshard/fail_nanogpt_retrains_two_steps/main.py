"""A nanoGPT-style checkpoint with FSDP2 and DCP: {'model', 'optimizer', 'model_args', 'iter_num',
'best_val_loss', 'config'}. `iter_num` is the index of the last step trained, but a resumed run
starts at iter_num - 1 ("to be safe"): it trains the last two saved steps again. The model's shape (model_args: n_layer, n_embd, ...) comes first in the
checkpoint and never changes."""

import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.fsdp import fully_shard

OUT_DIR = "out"
MODEL_ARGS = {"n_layer": 2, "n_embd": 16, "block_size": 8, "vocab_size": 32, "bias": True}
MAX_ITERS = 4  # per run
BATCH = 12


def get_batch(it: int, rank: int, world: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(7 + it)
    x = torch.randn(BATCH, MODEL_ARGS["n_embd"], generator=g)
    y = x.mean(dim=1, keepdim=True)
    per = BATCH // world
    return x[rank * per : (rank + 1) * per], y[rank * per : (rank + 1) * per]


def build() -> nn.Module:
    d = MODEL_ARGS["n_embd"]
    layers: list[nn.Module] = []
    for _ in range(MODEL_ARGS["n_layer"]):
        layers += [nn.Linear(d, d, bias=MODEL_ARGS["bias"]), nn.GELU()]
    return nn.Sequential(*layers, nn.Linear(d, 1))


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1337)
    model = build()
    for block in model:
        if isinstance(block, nn.Linear):
            fully_shard(block)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-3, betas=(0.9, 0.95))

    iter_num, best_val_loss = -1, 1e9
    if os.path.exists(os.path.join(OUT_DIR, ".metadata")):
        msd, osd = get_state_dict(model, optimizer)
        checkpoint = {
            "model": msd,
            "optimizer": osd,
            "model_args": dict(MODEL_ARGS),
            "iter_num": 0,
            "best_val_loss": 0.0,
        }
        dcp.load(checkpoint, checkpoint_id=OUT_DIR)
        set_state_dict(
            model,
            optimizer,
            model_state_dict=checkpoint["model"],
            optim_state_dict=checkpoint["optimizer"],
        )
        iter_num, best_val_loss = checkpoint["iter_num"], checkpoint["best_val_loss"]

    start = max(0, iter_num - 1)
    for iter_num in range(start, start + MAX_ITERS):
        x, y = get_batch(iter_num, rank, world)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        best_val_loss = min(best_val_loss, float(loss))

    msd, osd = get_state_dict(model, optimizer)
    checkpoint = {
        "model": msd,
        "optimizer": osd,
        "model_args": dict(MODEL_ARGS),
        "iter_num": iter_num,
        "best_val_loss": best_val_loss,
    }
    dcp.save(checkpoint, checkpoint_id=OUT_DIR)
    if rank == 0:
        print(f"world {world}: iter_num {iter_num}, loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
