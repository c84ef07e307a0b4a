"""The answer to a prepared question: the model's when one is configured and its answer passes the
checks (no solution code, the right language), else the built-in coach's. No database here: the
caller holds no transaction while the model answers.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from app.coach.builtin import N_, source_of
from app.coach.guard import open_fence_at
from app.coach.language import detect
from app.coach.llm import ChatProvider, ProviderFailed
from app.coach.prompt import build_messages
from app.coach.schemas import CoachAnswer, Provider, Source
from app.coach.service import Prepared
from app.content.markdown import render_markdown
from app.i18n import translate

log = logging.getLogger(__name__)

_CODE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.DOTALL)


@dataclass(frozen=True)
class Reply:
    answer: str
    sources: list[Source]
    provider: Provider

    def public(self) -> CoachAnswer:
        return CoachAnswer(
            answer=self.answer,
            answer_html=str(render_markdown(self.answer)),
            sources=self.sources,
            provider=self.provider,
        )


def builtin_reply(prepared: Prepared) -> Reply:
    return Reply(prepared.builtin.markdown, prepared.builtin.sources, "builtin")


def _messages(prepared: Prepared) -> list[dict[str, str]]:
    return build_messages(
        question=prepared.question,
        locale=prepared.locale,
        code=prepared.code,
        run=prepared.run,
        steps=prepared.steps,
        focus=prepared.focus,
    )


def refusal(prepared: Prepared, text: str) -> str | None:
    """Why the model's (partial) answer may not be shown, or None."""
    for guard in [prepared.guard, *prepared.other_guards]:
        reason = guard.refusal(text) if guard is not None else None
        if reason is not None:
            return reason
    return None


def wrong_language(prepared: Prepared, text: str) -> str | None:
    """The answer's prose (code left out) is clearly in another of our languages."""
    written_in = detect(_CODE.sub(" ", text))
    if written_in is not None and written_in != prepared.locale:
        return f"the answer is in {written_in}, not {prepared.locale}"
    return None


def _model_reply(prepared: Prepared, text: str) -> Reply:
    """The model's answer with its sources listed; ProviderFailed if it fails a check."""
    reason = refusal(prepared, text) or wrong_language(prepared, text)
    if reason is not None:
        raise ProviderFailed(reason)
    sources = [source_of(step) for step in prepared.steps]
    cited = [s for n, s in enumerate(sources, start=1) if f"[{n}]" in text] or sources
    if cited:
        heading = translate(prepared.locale, N_("Sources"))
        listed = "\n".join(f"- [{source.title}]({source.url})" for source in cited)
        text = f"{text.strip()}\n\n**{heading}:**\n\n{listed}"
    return Reply(text, cited, "llm")


def _model_for(prepared: Prepared, provider: ChatProvider | None) -> ChatProvider | None:
    """The model answers what the course covers; an honest "not covered" needs no model."""
    return provider if prepared.builtin.covered else None


def answer(prepared: Prepared, provider: ChatProvider | None) -> Reply:
    """The model's answer when one is configured and gives a good one; else the built-in's."""
    provider = _model_for(prepared, provider)
    if provider is None:
        return builtin_reply(prepared)
    try:
        return _model_reply(prepared, provider.complete(_messages(prepared)))
    except ProviderFailed as exc:
        log.warning("coach model failed, the built-in coach answers: %s", exc)
    except Exception:  # a bug in a client library must not cost the learner an answer either
        log.exception("coach model call broke, the built-in coach answers")
    return builtin_reply(prepared)


def stream(prepared: Prepared, provider: ChatProvider | None) -> Iterator[tuple[str, Any]]:
    """("delta", text) for each checked line as the model writes it, then ("done", Reply).

    A line is shown only once it is complete and what is written so far passes the guard; a code
    block only once it is closed, whole (never line by line); if the
    model fails or leaks part-way, ("reset", None) tells the page to drop what it showed, and the
    built-in coach's answer follows as "done".
    """
    provider = _model_for(prepared, provider)
    if provider is None:
        yield "done", builtin_reply(prepared)
        return
    written = ""
    shown = 0
    try:
        for piece in provider.stream(_messages(prepared)):
            written += piece
            complete = written.rfind("\n") + 1
            # A code block is held back whole until it is closed and judged.
            fence = open_fence_at(written[:complete])
            if fence is not None:
                complete = min(complete, fence)
            if complete > shown:
                reason = refusal(prepared, written[:complete])
                if reason is not None:
                    raise ProviderFailed(reason)
                yield "delta", written[shown:complete]
                shown = complete
        reply = _model_reply(prepared, written)
    except Exception as exc:  # ProviderFailed, or a bug in a client library: never a 500
        log.warning("coach model failed mid-stream, the built-in coach answers: %r", exc)
        if shown:
            yield "reset", None
        reply = builtin_reply(prepared)
    if len(written) > shown and reply.provider == "llm":
        yield "delta", written[shown:]
    yield "done", reply
