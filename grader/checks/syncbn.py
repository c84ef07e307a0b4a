"""Checks of `syncbn-sharded-state/syncbn`: SyncBatchNorm, converted before the DDP wrap."""

from __future__ import annotations

from typing import Any

from grader.checks.base import Outcome, RunView, check, failed, passed, plural, skipped

REL_TOL = 1e-5


def _plain_on_cpu(run: RunView) -> str:
    """On CPU workers: a program that converts only when CUDA is available fails here, why."""
    if run.device == "cuda":
        return ""
    return (
        " Convert on every device, not only when CUDA is available: call "
        "nn.SyncBatchNorm.convert_sync_batchnorm(model) before DDP(...) unconditionally. This "
        "CPU worker runs SyncBatchNorm layers as per-rank BatchNorm, so a converted model runs "
        "here and its conversion is checked."
    )


def _wraps(run: RunView) -> list[tuple[int, dict[str, Any]]]:
    """Every DDP wrap of every rank, in the order each rank made them."""
    return run.events("ddp_batchnorm")


def _converted_after(run: RunView, rank: int, wrap: dict[str, Any]) -> list[dict[str, Any]]:
    """Conversions on `rank`, after `wrap`, of a model that was already wrapped in DDP."""
    return [
        c
        for r, c in run.events("syncbn_convert")
        if r == rank
        and c.get("seq", 0) > wrap.get("seq", 0)
        and (c.get("inside_ddp", True) or c.get("is_ddp"))
    ]


def _which(wraps: list[tuple[int, dict[str, Any]]], e: dict[str, Any]) -> str:
    """'The model' for a program with one DDP wrap, 'The 2nd model' when there are several."""
    on_rank = [w for r, w in wraps if r == wraps[0][0]]
    if len(on_rank) < 2:
        return "The model"
    index = next((i for i, w in enumerate(on_rank) if w.get("line") == e.get("line")), 0)
    return f"The {_ordinal(index + 1)} model"


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


@check(
    "syncbn.converted",
    title="Every BatchNorm layer is a SyncBatchNorm",
    hint="model = nn.SyncBatchNorm.convert_sync_batchnorm(model) replaces every BatchNorm*d layer "
    "of the model, however deeply nested.",
)
def converted(run: RunView, params: dict[str, Any]) -> Outcome:
    wraps = _wraps(run)
    converts = run.events("syncbn_convert")
    if not wraps:
        if converts:
            rank, c = converts[0]
            return failed(
                f"The model was converted {run.where(c.get('line'))} but never wrapped in DDP, "
                "so its SyncBatchNorm layers never ran across ranks.",
                rank=rank,
                line=c.get("line"),
            )
        return failed("No model was wrapped in DDP, so no SyncBatchNorm layer ran.")
    late = False
    for rank, e in wraps:  # every wrap: a second DDP model with plain BatchNorm counts too
        if not e.get("n_plain"):
            continue
        if _converted_after(run, rank, e):
            late = True
            continue
        names = ", ".join(e.get("plain", [])[:6])
        return failed(
            f"{_which(wraps, e)} wrapped in DDP {run.where(e.get('line'))} still has "
            f"{plural(int(e['n_plain']), 'plain BatchNorm layer')}: {names}. Each rank "
            "normalises with the statistics of its own small batch only." + _plain_on_cpu(run),
            rank=rank,
            line=e.get("line"),
        )
    if late:
        return passed(
            "All BatchNorm layers were converted, but only after the DDP wrap (see the next check)."
        )
    rank, e = wraps[0]
    synced = sum(int(w.get("n_synced", 0)) for r, w in wraps if r == rank)
    if not synced:
        return failed(
            f"The model wrapped in DDP {run.where(e.get('line'))} has no BatchNorm layer at "
            "all: keep the model's BatchNorm layers and convert them.",
            rank=rank,
            line=e.get("line"),
        )
    n_wraps = sum(1 for r, _ in wraps if r == rank)
    what = "The model" if n_wraps == 1 else f"The {n_wraps} models"
    return passed(
        f"{what} wrapped in DDP {'has' if n_wraps == 1 else 'have'} "
        f"{plural(synced, 'SyncBatchNorm layer')} and no plain BatchNorm left."
    )


@check(
    "syncbn.before_wrap",
    title="The conversion happens before the DDP wrap",
    hint="Convert first, then wrap: model = nn.SyncBatchNorm.convert_sync_batchnorm(model); "
    "ddp_model = DDP(model, ...). DDP inspects and registers the layers it wraps when it is "
    "built.",
)
def before_wrap(run: RunView, params: dict[str, Any]) -> Outcome:
    wraps = _wraps(run)
    if not wraps:
        return failed("No model was wrapped in DDP.")
    for rank, e in wraps:
        later = _converted_after(run, rank, e) if e.get("n_plain") else []
        if later:
            c = later[0]
            return failed(
                f"convert_sync_batchnorm ran {run.where(c.get('line'))}, after the model had "
                f"been wrapped in DDP {run.where(e.get('line'))}: the wrapper was built around "
                "plain BatchNorm layers.",
                rank=rank,
                line=c.get("line"),
            )
    for rank, e in wraps:
        if e.get("n_plain"):
            return failed(
                f"When {_which(wraps, e).lower()} was wrapped in DDP {run.where(e.get('line'))} "
                f"it had {plural(int(e.get('n_synced', 0)), 'SyncBatchNorm layer')} and "
                f"{plural(int(e.get('n_plain', 0)), 'plain BatchNorm layer')}.",
                rank=rank,
                line=e.get("line"),
            )
    rank, e = wraps[0]
    if not any(int(w.get("n_synced", 0)) for r, w in wraps if r == rank):
        return failed(
            f"When the model was wrapped in DDP {run.where(e.get('line'))} it had no "
            "SyncBatchNorm layer.",
            rank=rank,
            line=e.get("line"),
        )
    return passed(
        f"The model already had its SyncBatchNorm layers when DDP wrapped it "
        f"{run.where(e.get('line'))}."
    )


@check(
    "syncbn.stats_synced",
    title="Running statistics are the same on every rank (GPU workers)",
    hint="With SyncBatchNorm the batch statistics are computed over the global batch, so every "
    "rank's running_mean and running_var stay identical. A plain BatchNorm layer keeps "
    "per-rank statistics.",
)
def stats_synced(run: RunView, params: dict[str, Any]) -> Outcome:
    if run.device != "cuda":
        return skipped(
            "SyncBatchNorm synchronises statistics only on GPUs (torch refuses it on CPU), and "
            "this run was on CPU workers: the grader ran each SyncBatchNorm as a per-rank "
            "BatchNorm and checked the conversion only. GPU workers check the statistics."
        )
    by_rank: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for rank, e in run.events("bn_stats"):
        by_rank.setdefault(rank, {}).setdefault(str(e.get("layer")), []).append(e)
    if not by_rank.get(0):
        return failed("No SyncBatchNorm layer ran a training forward pass on rank 0.", rank=0)
    compared = 0
    for rank, layers in sorted(by_rank.items()):
        if rank == 0:
            continue
        for layer, events in layers.items():
            for i, (a, b) in enumerate(zip(by_rank[0].get(layer, []), events, strict=False)):
                compared += 1
                for key in ("mean", "var"):
                    if a.get(key) == b.get(key):
                        continue
                    x, y = float(a.get(f"{key}_sum", 0)), float(b.get(f"{key}_sum", 0))
                    if abs(x - y) <= REL_TOL * max(abs(x), abs(y), 1e-12):
                        continue
                    return failed(
                        f"After training forward pass {i + 1}, layer {layer}'s running_{key} "
                        f"differs between rank 0 (sum {x:.6g}) and rank {rank} (sum {y:.6g}).",
                        rank=rank,
                    )
    if compared == 0:
        return failed("Only one rank ran SyncBatchNorm layers: there was nothing to compare.")
    return passed(
        f"The running statistics were identical on every rank after each of {compared} "
        "layer forward passes compared."
    )
