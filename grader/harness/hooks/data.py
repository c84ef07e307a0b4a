"""Data: which indices each loader iteration handed out, and set_epoch calls.

An "iteration" is one pass over a DataLoader (or a DistributedSampler iterated directly). The
optimizer hook counts the steps taken while an iteration was the last one to hand out indices:
iterations with steps drove training; a probe (`next(iter(loader))`) or a validation pass has none.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from typing import Any

import torch
from torch.utils.data import DistributedSampler, Subset
from torch.utils.data.dataloader import _BaseDataLoaderIter

from grader.events import Iteration, SetEpoch
from grader.harness.leaves import tensor_leaves
from grader.harness.tracer import Tracer, wrap

MAX_INDICES = 50_000
SIGNATURE_WIDTH = 4
MAX_SIGNATURE_ROWS = 8192  # per rank, over all iterations


def _sampler_info(sampler: Any) -> dict[str, Any]:
    info: dict[str, Any] = {"sampler": type(sampler).__name__, "sampler_id": id(sampler)}
    inner = getattr(sampler, "sampler", None)  # a BatchSampler wraps the real sampler
    if inner is not None and not isinstance(sampler, DistributedSampler):
        info = {
            "sampler": type(inner).__name__,
            "sampler_id": id(inner),
            "batch_sampler": type(sampler).__name__,
        }
        sampler = inner
    if isinstance(sampler, DistributedSampler):
        info.update(
            distributed=True,
            epoch=int(sampler.epoch),
            num_replicas=int(sampler.num_replicas),
            sampler_rank=int(sampler.rank),
            shuffle=bool(sampler.shuffle),
            drop_last=bool(sampler.drop_last),
            seed=int(sampler.seed),
        )
    else:
        info["distributed"] = False
    return info


def _as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _root_dataset(dataset: Any) -> tuple[Any, Any]:
    """(the dataset under any Subsets, a function mapping loader indices to its indices)."""
    maps = []
    while isinstance(dataset, Subset):
        maps.append(dataset.indices)
        dataset = dataset.dataset
    if not maps:
        return dataset, None

    def mapping(i: int) -> int:
        for indices in maps:
            i = int(indices[i])
        return i

    return dataset, mapping


def _subset_fingerprint(dataset: Any) -> str | None:
    """Which samples the Subsets over the dataset select (None without a Subset): it differs
    between ranks when, e.g., random_split ran after a per-rank seed."""
    if not isinstance(dataset, Subset):
        return None
    h = hashlib.blake2b(digest_size=8)
    while isinstance(dataset, Subset):
        h.update(repr([int(i) for i in list(dataset.indices)[:MAX_INDICES]]).encode())
        dataset = dataset.dataset
    return h.hexdigest()


def _mapped(indices: Any, mapping: Any) -> Any:
    if mapping is None:
        return indices
    try:
        if isinstance(indices, int):
            return mapping(indices)
        return [mapping(int(i)) for i in indices]
    except Exception:
        return indices


def _fingerprint(dataset: Any) -> str:
    """Which data the indices point into: equal on every rank when the ranks load the same data."""
    h = hashlib.blake2b(digest_size=8)
    h.update(type(dataset).__name__.encode())
    with contextlib.suppress(Exception):
        h.update(str(len(dataset)).encode())
    for t in getattr(dataset, "tensors", ())[:4]:
        if isinstance(t, torch.Tensor):
            flat = t.detach().reshape(-1)[:4096].to("cpu").contiguous()
            h.update(str(tuple(t.shape)).encode())
            h.update(flat.view(torch.uint8).numpy().tobytes())
    # "t:" the tensors themselves were hashed (equal means the same data); "w:" only the type and
    # length were (equal says little).
    return ("t:" if getattr(dataset, "tensors", None) else "w:") + h.hexdigest()


def _signature(batch: Any) -> list[list[float]]:
    """A few numbers per sample of a batch (its first floating tensor): enough to recognise the
    same sample on another rank even when the ranks' datasets are different objects."""
    for leaf in tensor_leaves(batch):
        if leaf.is_floating_point() and leaf.dim() >= 1:
            rows = leaf.detach().reshape(leaf.shape[0], -1)[:, :SIGNATURE_WIDTH].float().cpu()
            return [[round(float(v), 5) for v in row] for row in rows.tolist()]
    return []


def install(tracer: Tracer) -> None:
    iterations: list[dict[str, Any]] = []
    by_loader_iter: dict[int, tuple[Any, dict[str, Any]]] = {}
    local = threading.local()
    cap = tracer.settings.max_indices or MAX_INDICES

    def new_iteration(info: dict[str, Any], line: int | None) -> dict[str, Any]:
        record = {
            "id": len(iterations),
            "line": line,
            "steps": 0,
            "indices": [],
            "count": 0,
            **info,
        }
        iterations.append(record)
        return record

    def add(record: dict[str, Any], indices: Any) -> None:
        if isinstance(indices, int):
            indices = [indices]
        try:
            items = [int(i) for i in indices]
        except (TypeError, ValueError):
            return
        record["count"] += len(items)
        room = cap - len(record["indices"])
        if room > 0:
            record["indices"].extend(items[:room])
        tracer.state["current_iter"] = record

    def make_next_index(original: Any) -> Any:
        def _next_index(self: Any) -> Any:
            local.in_loader = True
            try:
                indices = original(self)
            except StopIteration:
                known = by_loader_iter.get(id(self))
                if known is not None and known[0] is self._sampler_iter:
                    known[1]["exhausted"] = True  # the pass ran to the end of its sampler
                raise
            finally:
                local.in_loader = False
            sampler_iter = self._sampler_iter
            known = by_loader_iter.get(id(self))
            if known is None or known[0] is not sampler_iter:
                info = _sampler_info(self._index_sampler)
                root, mapping = _root_dataset(self._dataset)
                try:
                    info["dataset_len"] = len(root)
                    # What this loader can hand out (a Subset is smaller than its dataset).
                    info["loader_len"] = len(self._dataset)
                except Exception:
                    info["dataset_len"] = None
                info["mapped"] = mapping is not None
                with contextlib.suppress(Exception):
                    info["subset"] = _subset_fingerprint(self._dataset)
                try:
                    info["dataset"] = _fingerprint(root)
                except Exception:
                    info["dataset"] = None
                info["batch_size"] = getattr(self._index_sampler, "batch_size", None)
                record = new_iteration(info, tracer.where())
                record["_map"] = mapping
                by_loader_iter[id(self)] = (sampler_iter, record)
            else:
                record = known[1]
            add(record, _mapped(indices, record.get("_map")))
            return indices

        return _next_index

    def make_sampler_iter(original: Any) -> Any:
        def __iter__(self: Any) -> Any:
            inner = original(self)
            if getattr(local, "in_loader", False):
                return inner
            info = _sampler_info(self)
            info["dataset_len"] = len(self.dataset) if hasattr(self.dataset, "__len__") else None
            record = new_iteration(info, tracer.where())

            def gen() -> Any:
                for index in inner:
                    add(record, index)
                    yield index

            return gen()

        return __iter__

    def make_set_epoch(original: Any) -> Any:
        def set_epoch(self: Any, epoch: int) -> None:
            tracer.record(SetEpoch(epoch=_as_int(epoch), sampler_id=id(self), line=tracer.where()))
            return original(self, epoch)

        return set_epoch

    signature_rows = {"n": 0}

    def make_next(original: Any) -> Any:
        def __next__(self: Any) -> Any:
            batch = original(self)
            known = by_loader_iter.get(id(self))
            if known is not None and signature_rows["n"] < MAX_SIGNATURE_ROWS:
                with contextlib.suppress(Exception):
                    rows = _signature(batch)
                    if rows:
                        signature_rows["n"] += len(rows)
                        known[1].setdefault("samples", []).extend(rows)
            return batch

        return __next__

    wrap(_BaseDataLoaderIter, "_next_index", make_next_index)
    wrap(_BaseDataLoaderIter, "__next__", make_next)
    wrap(DistributedSampler, "__iter__", make_sampler_iter)
    wrap(DistributedSampler, "set_epoch", make_set_epoch)

    def finish() -> None:
        for record in iterations:
            record.pop("_map", None)
            tracer.record(Iteration(**record))

    tracer.finalizers.append(finish)
