"""An OpenAI-compatible chat-completions provider (vLLM, llama.cpp server, Ollama, hosted APIs).

`POST {RDV_COACH_URL}/chat/completions` with the model, the messages and `stream`; a JSON answer
(`choices[0].message.content`) or Server-Sent Events (`data: {"choices": [{"delta": {"content":
...}}]}` chunks until `data: [DONE]`). Anything else (a refused connection, a status other than 200,
a body that is not that shape, an empty answer, the time limit passed) raises `ProviderFailed`,
and the service answers with the built-in coach instead.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx


class ProviderFailed(Exception):
    """The model could not give a usable answer; the built-in coach answers instead."""


@dataclass(frozen=True)
class ChatProvider:
    base_url: str
    model: str
    api_key: str | None
    timeout_s: float

    def _request(self, messages: list[dict[str, str]], stream: bool) -> dict[str, Any]:
        return {"model": self.model, "messages": messages, "stream": stream, "temperature": 0.2}

    def _client(self) -> httpx.Client:
        headers = {"Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return httpx.Client(
            base_url=self.base_url.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 5.0)),
        )

    def complete(self, messages: list[dict[str, str]]) -> str:
        """The whole answer at once."""
        try:
            with self._client() as client:
                response = client.post("/chat/completions", json=self._request(messages, False))
        except httpx.HTTPError as exc:
            raise ProviderFailed(f"the model server could not be reached: {exc!r}") from exc
        if response.status_code != 200:
            raise ProviderFailed(f"the model server answered {response.status_code}")
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ProviderFailed("the model server's answer is not a chat completion") from exc
        if not isinstance(content, str) or not content.strip():
            raise ProviderFailed("the model gave an empty answer")
        return content

    def stream(self, messages: list[dict[str, str]]) -> Iterator[str]:
        """The answer in pieces as the model writes them; the whole within the time limit."""
        deadline = time.monotonic() + self.timeout_s
        produced = finished = False
        try:
            with (
                self._client() as client,
                client.stream(
                    "POST",
                    "/chat/completions",
                    json=self._request(messages, True),
                    headers={"Accept": "text/event-stream"},
                ) as response,
            ):
                if response.status_code != 200:
                    raise ProviderFailed(f"the model server answered {response.status_code}")
                for line in response.iter_lines():
                    if time.monotonic() > deadline:
                        raise ProviderFailed("the model took longer than the time limit")
                    piece = _delta(line)
                    if piece is _DONE:
                        finished = True
                        break
                    if piece:
                        produced = True
                        yield str(piece)
        except httpx.HTTPError as exc:
            raise ProviderFailed(f"the model server failed mid-answer: {exc!r}") from exc
        if not finished:
            raise ProviderFailed("the model's stream ended before its answer was complete")
        if not produced:
            raise ProviderFailed("the model gave an empty answer")


_DONE = object()


def _delta(line: str) -> object:
    """The text of one SSE line of a streamed completion ('' for keep-alives and roles)."""
    if not line.strip() or line.startswith(":"):
        return ""
    if not line.startswith("data:"):
        raise ProviderFailed("the model server's stream is not Server-Sent Events")
    data = line[5:].strip()
    if data == "[DONE]":
        return _DONE
    try:
        choice = json.loads(data)["choices"][0]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ProviderFailed("a chunk of the model's stream is not a completion chunk") from exc
    content = (choice.get("delta") or {}).get("content")
    return content if isinstance(content, str) else ""
