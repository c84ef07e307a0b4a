"""Per-rank output as the launcher leaves it: attempt_N/<rank>/std{out,err}.log."""

from __future__ import annotations

from pathlib import Path

from grader.inside.ranklogs import OutputTailer


def _write(root: Path, attempt: int, rank: int, out: str, err: str) -> None:
    folder = root / f"attempt_{attempt}" / str(rank)
    folder.mkdir(parents=True)
    (folder / "stdout.log").write_text(out)
    (folder / "stderr.log").write_text(err)


def test_a_restart_is_marked_once_per_rank_between_the_attempts(tmp_path: Path) -> None:
    for rank in (0, 1):
        _write(tmp_path, 0, rank, f"epoch 0 on rank {rank}\n", "")
        _write(tmp_path, 1, rank, f"resumed on rank {rank}\n", "a warning\n")
    lines: list[tuple[int, str]] = []
    tailer = OutputTailer(tmp_path, cap=10_000, on_line=lambda r, s: lines.append((r, s)))
    tailer.start()
    tailer.stop()

    text, truncated, _ = tailer.result(1)
    assert not truncated
    assert text.count("[restart: attempt 1]") == 1
    assert text.index("epoch 0 on rank 1") < text.index("[restart: attempt 1]")
    assert text.index("[restart: attempt 1]") < text.index("resumed on rank 1")
    assert "a warning" in text
    assert sum("[restart" in line for r, line in lines if r == 0) == 1


def test_output_over_the_cap_is_cut_with_a_visible_note(tmp_path: Path) -> None:
    _write(tmp_path, 0, 0, "x" * 5000 + "\nlast line\n", "")
    tailer = OutputTailer(tmp_path, cap=1000, on_line=lambda r, s: None)
    tailer.start()
    tailer.stop()
    text, truncated, total = tailer.result(0)
    assert truncated and total == 5011
    assert "[output truncated: rank 0 wrote" in text
    assert text.rstrip().endswith("last line")
