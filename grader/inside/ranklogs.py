"""Reading what the ranks left behind: trace files and per-rank output logs (in the sandbox)."""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

TAIL_BYTES = 2048
POLL_S = 0.2
_TRACE = re.compile(r"rank-(\d+)-a(\d+)\.jsonl$")
_LOG = re.compile(r"attempt_(\d+)/(\d+)/std(out|err)\.log$")


def read_traces(trace_dir: Path) -> dict[int, list[dict[str, Any]]]:
    """Events per rank, attempts in order, each event tagged with its attempt."""
    out: dict[int, list[tuple[int, dict[str, Any]]]] = {}
    for path in trace_dir.glob("rank-*-a*.jsonl"):
        m = _TRACE.search(path.name)
        if not m:
            continue
        rank, attempt = int(m.group(1)), int(m.group(2))
        for raw in path.read_bytes().splitlines():
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            if isinstance(event, dict):
                event["attempt"] = attempt
                out.setdefault(rank, []).append((attempt, event))
    return {
        r: [e for _, e in sorted(items, key=lambda ae: (ae[0], ae[1].get("seq", 0)))]
        for r, items in out.items()
    }


class _RankLog:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.kept = bytearray()
        self.total = 0
        self.partial = bytearray()
        self.offsets: dict[Path, int] = {}
        self.tail = b""
        self.attempts = {0}  # attempts whose start is marked in the output (the first needs none)


class OutputTailer:
    """Follows every rank's log file; keeps the first `cap` bytes per rank, streams their lines.

    A flood is skipped over (never read into memory) once the cap is reached.
    """

    def __init__(self, log_dir: Path, cap: int, on_line: Callable[[int, str], None]) -> None:
        self.log_dir = log_dir
        self.cap = cap
        self.on_line = on_line
        self.ranks: dict[int, _RankLog] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rank-output", daemon=True)
        self._lock = threading.Lock()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        with self._lock:
            self._poll(final=True)

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            with self._lock:
                self._poll(final=False)

    def _files(self) -> list[tuple[int, int, Path]]:
        found = []
        if self.log_dir.exists():
            for path in self.log_dir.rglob("std*.log"):
                m = _LOG.search(path.as_posix())
                if m:
                    found.append((int(m.group(1)), int(m.group(2)), path))
        return sorted(found)

    def _poll(self, *, final: bool) -> None:
        for attempt, rank, path in self._files():
            log = self.ranks.setdefault(rank, _RankLog(self.cap))
            offset = log.offsets.get(path)
            if offset is None:
                offset = 0
                if attempt not in log.attempts:  # once per attempt, not once per stdout/stderr
                    log.attempts.add(attempt)
                    self._feed(rank, log, f"[restart: attempt {attempt}]\n".encode())
            try:
                size = path.stat().st_size
            except OSError:
                continue
            if size <= offset:
                log.offsets[path] = offset
                continue
            if len(log.kept) >= self.cap:
                log.total += size - offset
                log.offsets[path] = size
                if final:
                    log.tail = _read_tail(path, size)
                continue
            with open(path, "rb") as f:
                f.seek(offset)
                chunk = f.read(min(size - offset, self.cap + 65536))
            log.offsets[path] = offset + len(chunk)
            self._feed(rank, log, chunk)
            if final and log.offsets[path] < size:
                log.total += size - log.offsets[path]
                log.tail = _read_tail(path, size)
        if final:
            for _, rank, path in self._files():
                log = self.ranks[rank]
                if log.total > len(log.kept) and path.stat().st_size > 0:
                    log.tail = _read_tail(path, path.stat().st_size)
            for rank, log in self.ranks.items():
                if log.partial and len(log.kept) < self.cap:
                    self._emit(rank, bytes(log.partial))
                    log.partial.clear()

    def _feed(self, rank: int, log: _RankLog, chunk: bytes) -> None:
        log.total += len(chunk)
        room = self.cap - len(log.kept)
        if room <= 0:
            return
        keep = chunk[:room]
        log.kept += keep
        log.partial += keep
        while (cut := log.partial.find(b"\n")) >= 0:
            self._emit(rank, bytes(log.partial[:cut]))
            del log.partial[: cut + 1]

    def _emit(self, rank: int, line: bytes) -> None:
        with contextlib.suppress(Exception):
            self.on_line(rank, line.decode("utf-8", "replace"))

    def result(self, rank: int) -> tuple[str, bool, int]:
        """(output, truncated, total bytes written) for one rank."""
        log = self.ranks.get(rank)
        if log is None:
            return "", False, 0
        text = log.kept.decode("utf-8", "replace")
        truncated = log.total > len(log.kept)
        if truncated:
            if text and not text.endswith("\n"):
                text += "\n"
            text += (
                f"[output truncated: rank {rank} wrote {_size(log.total)}; the first "
                f"{_size(len(log.kept))} are shown"
                + (" and the last lines below]\n" if log.tail else "]\n")
            )
            if log.tail:
                tail = log.tail.replace(b"\0", b"").decode("utf-8", "replace")
                text += tail.split("\n", 1)[-1] if "\n" in tail else tail
        return text, truncated, log.total


def _read_tail(path: Path, size: int) -> bytes:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, size - TAIL_BYTES))
            return f.read(TAIL_BYTES)
    except OSError:
        return b""


def _size(n: int) -> str:
    for unit, factor in (("MB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor:
            return f"{n / factor:.1f} {unit}"
    return f"{n} bytes"
