"""What the grader's evidence says beyond its words: which case of a check the run showed, a
rank's stack cut to the learner's own frames, and the grader's untranslated fragments in the
learner's language.

A check may fail in ways that need different explanations: `sampler.shards` fails when two ranks
train on the same samples (overlap) and when some samples reach no rank (coverage: a shard cut for
another world size); `elastic.resumed` when the snapshot is never loaded and when it is loaded
but training starts over; `run.completed` when a rank waits forever (a timeout) and when the
optimizer state was saved unconsolidated. The case comes from the check's `message_id` (and, for a
crash, the exception's words), never from the learner's code.
"""

from __future__ import annotations

import re
from typing import Any

from app.errors import N_
from app.i18n import translate

_OVERLAP = {"sampler.overlap", "sampler.same_samples", "sampler.hand_made_overlap"}
_COVERAGE = {"sampler.partial", "sampler.partial_one"}
_NOT_LOADED = {"elastic.not_loaded", "elastic.not_loaded_one"}
_STARTED_OVER = {"elastic.started_over"}
_SIGNAL = re.compile(r"\bSIG[A-Z]{2,}\b|\bsignal \d+|killed by signal|\bsinal\b|sinyal")
_SIGNAL_IDS = {"run.killed", "run.killed_says", "run.killed_oom"}
_TIMEOUT_IDS = {
    "run.unfinished",
    "run.unfinished_at",
    "run.store_timeout",
    "run.stopped_early",
    "run.collective_timeout",
}

EXPLANATIONS: dict[tuple[str, str], str] = {
    ("sampler.shards", "overlap"): N_(
        "Your run showed samples that two ranks both trained on: their shards overlap. Each rank "
        "must get a slice of its own, so look at what hands the samples out."
    ),
    ("sampler.shards", "coverage"): N_(
        "Your run showed samples that no rank trained on (not samples seen twice): together the "
        "ranks missed part of the data. That happens when the shards are cut for another number "
        "of ranks than the run has, for example a world size written by hand."
    ),
    ("elastic.resumed", "not_loaded"): N_(
        "After the restart your program did not load the snapshot it had saved, so training "
        "began again from nothing. Look at what the program does at start when a snapshot file "
        "exists."
    ),
    ("elastic.resumed", "started_over"): N_(
        "After the restart your program did load the snapshot, but then ran every step again: "
        "the step it resumes from is off. Resume right after the last step the snapshot holds."
    ),
    ("run.completed", "timeout"): N_(
        "Your run did not crash: it ran out of time, with a rank waiting in a collective that "
        "another rank never reached. Find the collective call that not every rank makes."
    ),
    ("run.completed", "signal"): N_(
        "Your run crashed: a rank was ended by a signal (such as SIGABRT or SIGSEGV), it did not "
        "run out of time. A signal comes from native code or from the process being killed: read "
        "the last lines that rank printed, and the first error before them."
    ),
    ("run.completed", "not_consolidated"): N_(
        "Your run crashed because the optimizer state was saved before it was consolidated: rank "
        "0 asked for the whole state, but the shards were never gathered to it."
    ),
}


def case_of(check: dict[str, Any]) -> str | None:
    """The case of a failed check the run showed, for the checks that have several."""
    check_id = check.get("id")
    # The message's own id and those nested in its parameters ("combine.with_ranks" wraps the
    # check's real sentence, e.g. "sampler.overlap").
    ids = {check.get("message_id"), *_nested_ids(check.get("params"))}
    english = str(check.get("message") or "").lower()
    if check_id == "sampler.shards":
        if ids & _OVERLAP:
            return "overlap"
        if ids & _COVERAGE:
            return "coverage"
    elif check_id == "elastic.resumed":
        if ids & _NOT_LOADED:
            return "not_loaded"
        if ids & _STARTED_OVER:
            return "started_over"
    elif check_id == "run.completed":
        if "consolidat" in english:
            return "not_consolidated"
        if _SIGNAL.search(str(check.get("message") or "")) or ids & _SIGNAL_IDS:
            return "signal"  # a crash, whatever else the message names (a watchdog's timeout)
        if ids & _TIMEOUT_IDS or "timed out" in english or "timeout" in english:
            return "timeout"
    return None


def _nested_ids(params: Any) -> set[str]:
    """Every message id inside a Result's parameters ({"id", "en", "params"} values)."""
    found: set[str] = set()
    if isinstance(params, dict):
        if isinstance(params.get("id"), str) and "en" in params:
            found.add(params["id"])
        for value in params.values():
            found |= _nested_ids(value)
    elif isinstance(params, list):
        for value in params:
            found |= _nested_ids(value)
    return found


def explanation(check_id: str, case: str | None, locale: str) -> str | None:
    message = EXPLANATIONS.get((check_id, case)) if case is not None else None
    return translate(locale, message) if message is not None else None


# Interpreter noise in a stack: faulthandler's list of loaded extension modules and its headers.
_NOISE = re.compile(r"^\s*(Extension modules:|Fatal Python error:|Current thread 0x|Thread 0x)")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:,? in (?P<func>.+))?')
_INTERNAL_PATH = re.compile(r"\[?/[\w./+-]+(?::\d+)?\]?")
LEARNER_FILE = "main.py"


def learner_frames(stack: str, learner_file: str = LEARNER_FILE) -> str | None:
    """The rank's stack cut to the frames in the learner's own file (each with its source line)
    and the final error, without the server's paths; None if no frame is the learner's."""
    lines = [line for line in stack.strip().splitlines() if not _NOISE.match(line)]
    kept: list[str] = []
    keep_next = False
    for line in lines:
        frame = _FRAME.match(line)
        if frame is not None:
            keep_next = frame["file"].rsplit("/", 1)[-1] == learner_file
            if keep_next:
                where = f'File "{learner_file}", line {frame["line"]}'
                kept.append(f"{where}, in {frame['func']}" if frame["func"] else where)
            continue
        if keep_next and line.strip() and not set(line.strip()) <= set("^~ "):
            kept.append("    " + line.strip())
            keep_next = False
    if not kept:
        return None
    last = lines[-1].strip()
    if last and not _FRAME.match(last) and not last.startswith("Traceback"):
        kept.append(_INTERNAL_PATH.sub("", last).replace("  ", " ").strip())
    return "\n".join(kept)
