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


def _first_wrap(run: RunView) -> tuple[int, dict[str, Any]] | None:
    wraps = run.events("ddp_batchnorm")
    return wraps[0] if wraps else None


@check(
    "syncbn.converted",
    title="Every BatchNorm layer is a SyncBatchNorm",
    hint="model = nn.SyncBatchNorm.convert_sync_batchnorm(model) replaces every BatchNorm*d layer "
    "of the model, however deeply nested.",
)
def converted(run: RunView, params: dict[str, Any]) -> Outcome:
    wrap = _first_wrap(run)
    converts = run.events("syncbn_convert")
    if wrap is None:
        if converts:
            rank, c = converts[0]
            return failed(
                f"The model was converted {run.where(c.get('line'))} but never wrapped in DDP, "
                "so its SyncBatchNorm layers never ran across ranks.",
                rank=rank,
                line=c.get("line"),
            )
        return failed("No model was wrapped in DDP, so no SyncBatchNorm layer ran.")
    rank, e = wrap
    later = [c for r, c in converts if r == rank and c.get("seq", 0) > e.get("seq", 0)]
    if e.get("n_plain"):
        if later:
            return passed(
                f"All BatchNorm layers were converted, but only after the DDP wrap "
                f"{run.where(e.get('line'))} (see the next check)."
            )
        names = ", ".join(e.get("plain", [])[:6])
        return failed(
            f"The model wrapped in DDP {run.where(e.get('line'))} still has "
            f"{plural(int(e['n_plain']), 'plain BatchNorm layer')}: {names}. Each rank "
            "normalises with the statistics of its own small batch only." + _plain_on_cpu(run),
            rank=rank,
            line=e.get("line"),
        )
    if not e.get("n_synced") and not later:
        return failed(
            f"The model wrapped in DDP {run.where(e.get('line'))} has no BatchNorm layer at "
            "all: keep the model's BatchNorm layers and convert them.",
            rank=rank,
            line=e.get("line"),
        )
    return passed(
        f"The model wrapped in DDP has {plural(int(e.get('n_synced', 0)), 'SyncBatchNorm layer')} "
        "and no plain BatchNorm left."
    )


@check(
    "syncbn.before_wrap",
    title="The conversion happens before the DDP wrap",
    hint="Convert first, then wrap: model = nn.SyncBatchNorm.convert_sync_batchnorm(model); "
    "ddp_model = DDP(model, ...). DDP inspects and registers the layers it wraps when it is "
    "built.",
)
def before_wrap(run: RunView, params: dict[str, Any]) -> Outcome:
    wrap = _first_wrap(run)
    if wrap is None:
        return failed("No model was wrapped in DDP.")
    rank, e = wrap
    later = [
        c
        for r, c in run.events("syncbn_convert")
        if r == rank and c.get("seq", 0) > e.get("seq", 0)
    ]
    if later:
        c = later[0]
        return failed(
            f"convert_sync_batchnorm ran {run.where(c.get('line'))}, after the model had been "
            f"wrapped in DDP {run.where(e.get('line'))}: the wrapper was built around plain "
            "BatchNorm layers.",
            rank=rank,
            line=c.get("line"),
        )
    if e.get("n_plain") or not e.get("n_synced"):
        return failed(
            f"When the model was wrapped in DDP {run.where(e.get('line'))} it had "
            f"{plural(int(e.get('n_synced', 0)), 'SyncBatchNorm layer')} and "
            f"{plural(int(e.get('n_plain', 0)), 'plain BatchNorm layer')}.",
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
