"""Checkpoints: every torch.save / torch.load, and the renames that move files into place."""

from __future__ import annotations

import dataclasses
import io
import os
import stat
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from grader.events import Load, Rename, Save, SavedStateDict
from grader.harness.hooks.ddp import bare_module
from grader.harness.tracer import Tracer, wrap

MAX_KEYS = 40


def _path(f: Any) -> str | None:
    try:
        return os.path.abspath(os.fspath(f))
    except TypeError:
        name = getattr(f, "name", None)
        if isinstance(name, int):  # os.fdopen(fd): the file the descriptor points at
            try:
                name = os.readlink(f"/proc/self/fd/{name}")
            except OSError:
                return None
        return os.path.abspath(name) if isinstance(name, str) else None


def _target(f: Any) -> tuple[str | None, str]:
    """Where a torch.save writes: (the absolute path or None, "path" for a file name, "file" for
    a file object open on disk, "memory" for an in-memory buffer such as io.BytesIO or any other
    object that is no file on disk)."""
    if isinstance(f, (io.BytesIO, bytearray, memoryview)):
        return None, "memory"
    try:
        return os.path.abspath(os.fspath(f)), "path"
    except TypeError:
        pass
    try:
        on_disk = stat.S_ISREG(os.fstat(f.fileno()).st_mode)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        on_disk = False
    if not on_disk:
        return None, "memory"
    return _path(f), "file"


DCP_SAVES = ("save", "async_save", "save_state_dict")
DCP_LOADS = ("load", "load_state_dict")


def _dcp_dir(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """The directory a torch.distributed.checkpoint save writes to (or a load reads from): its
    `checkpoint_id`, else its storage writer's or reader's path (FileSystemWriter/Reader)."""
    where = kwargs.get("checkpoint_id")
    storage = kwargs.get("storage_writer", kwargs.get("storage_reader", args[0] if args else None))
    if where is None and storage is not None:
        where = getattr(storage, "path", None)
    try:
        return os.path.abspath(os.fspath(where)) if where is not None else None
    except TypeError:
        return None


def _state_dicts(obj: Any, where: str = "", depth: int = 0) -> list[tuple[str, Mapping[str, Any]]]:
    """Mappings of str -> tensor inside obj (the object itself, or nested in dicts/lists)."""
    found: list[tuple[str, Mapping[str, Any]]] = []
    if depth > 3:
        return found
    if isinstance(obj, Mapping):
        if (
            obj
            and all(isinstance(k, str) for k in obj)
            and any(isinstance(v, torch.Tensor) for v in obj.values())
        ):
            found.append((where, obj))
        for k, v in list(obj.items())[:200]:
            if isinstance(v, (Mapping, list, tuple)):
                found += _state_dicts(v, f"{where}[{k!r}]", depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj[:50]):
            found += _state_dicts(v, f"{where}[{i}]", depth + 1)
    return found


PREFIXES = ("module.", "_orig_mod.")  # DDP's and torch.compile's wrappers


def strip_prefixes(key: str) -> str:
    """A key without the wrappers' prefixes: 'module._orig_mod.0.weight' -> '0.weight'."""
    stripped = True
    while stripped:
        stripped = False
        for prefix in PREFIXES:
            if key.startswith(prefix):
                key, stripped = key[len(prefix) :], True
    return key


def _bare_models(tracer: Tracer) -> list[dict[str, Any]]:
    """The state_dict of the plain model inside every DDP wrapper made so far."""
    return [bare_module(m).state_dict() for m in tracer.state.get("ddp_models", [])]


def _judge_state_dict(
    where: str, sd: Mapping[str, Any], bares: list[dict[str, Any]]
) -> SavedStateDict:
    """How a saved state_dict fits the bare model it matches best (of every DDP wrap)."""
    keys = list(sd.keys())
    stripped = [strip_prefixes(k) for k in keys]
    where = where or "(the saved object)"
    n, sample = len(keys), keys[:5]
    prefixed = sum(k.startswith("module.") for k in keys)
    compiled = sum("_orig_mod." in k for k in keys)
    if not bares:
        return SavedStateDict(
            where=where,
            n=n,
            prefixed=prefixed,
            compiled_prefixed=compiled,
            sample=sample,
            model=any(k.rsplit(".", 1)[-1] in ("weight", "bias") for k in stripped),
        )
    bare = max(bares, key=lambda b: len(set(stripped) & set(b)))
    overlap = len(set(stripped) & set(bare))
    missing = [k for k in bare if k not in sd]
    unexpected = [k for k in keys if k not in bare]
    shape_bad = [
        k
        for k in keys
        if k in bare and hasattr(sd[k], "shape") and tuple(sd[k].shape) != tuple(bare[k].shape)
    ]
    return SavedStateDict(
        where=where,
        n=n,
        prefixed=prefixed,
        compiled_prefixed=compiled,
        sample=sample,
        model=overlap >= max(1, len(bare) // 2),
        missing=missing[:MAX_KEYS],
        unexpected=unexpected[:MAX_KEYS],
        n_missing=len(missing),
        n_unexpected=len(unexpected),
        shape_mismatch=shape_bad[:MAX_KEYS],
        loadable=not missing and not unexpected and not shape_bad,
    )


def analyze(obj: Any, tracer: Tracer) -> Save:
    """What a saved object holds, judged against the bare model of every DDP wrapper (a `Save`
    without its path, line and outcome)."""
    models = tracer.state.get("ddp_models", [])
    kind = type(obj).__name__
    if isinstance(obj, DDP):
        return Save(type=kind, holds="ddp", model_state=True)
    if isinstance(obj, torch.nn.Module):
        is_bare = any(obj is m.module or obj is bare_module(m) for m in models)
        return Save(type=kind, holds="module", model_state=is_bare or not models)
    bares = _bare_models(tracer)
    found = [_judge_state_dict(where, sd, bares) for where, sd in _state_dicts(obj)]
    return Save(
        type=kind,
        holds="state" if found else "other",
        state_dicts=found,
        model_state=any(sd.model for sd in found),
    )


def install(tracer: Tracer) -> None:
    def make_save(original: Any) -> Any:
        def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
            line = tracer.where()
            path, target = _target(f)
            try:
                info = analyze(obj, tracer)
            except Exception as exc:
                tracer.fail("save", exc)
                info = Save(type=type(obj).__name__, holds="other")
            info = dataclasses.replace(info, path=path, line=line, target=target, began=time.time())
            try:
                out = original(obj, f, *args, **kwargs)
            except BaseException as exc:
                tracer.record(dataclasses.replace(info, ok=False, error=repr(exc)[:300]))
                raise
            tracer.record(dataclasses.replace(info, ok=True))
            return out

        return save

    def traced_load(path: Any, line: Any, call: Callable[[], Any]) -> Any:
        """Run a load, recording where it read from, when, and whether it worked."""
        began = time.time()
        try:
            out = call()
        except BaseException as exc:
            tracer.record(Load(path=path, line=line, ok=False, error=repr(exc)[:300], began=began))
            raise
        tracer.record(Load(path=path, line=line, ok=True, began=began))
        return out

    def make_load(original: Any) -> Any:
        def load(f: Any, *args: Any, **kwargs: Any) -> Any:
            return traced_load(_path(f), tracer.where(), lambda: original(f, *args, **kwargs))

        return load

    def make_rename(original: Any) -> Any:
        def rename(src: Any, dst: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(src, dst, *args, **kwargs)
            try:
                tracer.record(Rename(src=_path(src), dst=_path(dst), line=tracer.where()))
            except Exception as exc:
                tracer.fail("rename", exc)
            return out

        return rename

    inside = {"dcp": False}

    def make_dcp_save(original: Any) -> Any:
        def save(state_dict: Any, *args: Any, **kwargs: Any) -> Any:
            if inside["dcp"]:  # async_save calls save: one write
                return original(state_dict, *args, **kwargs)
            line = tracer.where()
            try:
                info = dataclasses.replace(
                    analyze(state_dict, tracer),
                    path=_dcp_dir(args, kwargs),
                    line=line,
                    target="dcp",
                )
            except Exception as exc:
                tracer.fail("dcp save", exc)
                info = Save(type=type(state_dict).__name__, holds="other", target="dcp")
            inside["dcp"] = True
            info = dataclasses.replace(info, began=time.time())
            try:
                out = original(state_dict, *args, **kwargs)
            except BaseException as exc:
                tracer.record(dataclasses.replace(info, ok=False, error=repr(exc)[:300]))
                raise
            finally:
                inside["dcp"] = False
            tracer.record(dataclasses.replace(info, ok=True))
            return out

        return save

    def make_dcp_load(original: Any) -> Any:
        def load(state_dict: Any, *args: Any, **kwargs: Any) -> Any:
            path, line = _dcp_dir(args, kwargs), tracer.where()
            return traced_load(path, line, lambda: original(state_dict, *args, **kwargs))

        return load

    def hook_dcp(dcp: Any) -> None:
        saver = getattr(dcp, "state_dict_saver", None)
        loader = getattr(dcp, "state_dict_loader", None)
        for owners, names, make in (
            ((dcp, saver), DCP_SAVES, make_dcp_save),
            ((dcp, loader), DCP_LOADS, make_dcp_load),
        ):
            for owner in owners:
                for name in names:
                    if owner is not None and callable(getattr(owner, name, None)):
                        wrap(owner, name, make)

    tracer.when_imported("torch.distributed.checkpoint", hook_dcp)
    wrap(torch, "save", make_save)
    wrap(torch, "load", make_load)
    wrap(torch.serialization, "save", make_save)
    wrap(torch.serialization, "load", make_load)
    wrap(os, "replace", make_rename)
    wrap(os, "rename", make_rename)
