"""An OpenAI-compatible chat-completions provider (vLLM, llama.cpp server, Ollama, hosted APIs).

`POST {RDV_COACH_URL}/chat/completions` with the model, the messages and `stream`; a JSON answer
(`choices[0].message.content`) or Server-Sent Events (`data: {"choices": [{"delta": {"content":
...}}]}` chunks until `data: [DONE]`). Anything else (a refused connection, a status other than 200,
a body that is not that shape, an empty answer, the time limit passed) raises `ProviderFailed`,
and the service answers with the built-in coach instead.

The time limit is one wall-clock deadline for the whole call (connecting, waiting, every byte of
the body), not a limit per read: the request runs on its own event loop in a worker thread, under
`asyncio.timeout`, and the caller waits on a queue no longer than the deadline. A server that
sends its body one byte every few seconds is cut at the deadline all the same.
"""

from __future__ import annotations

import asyncio
import json
import queue
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import SecretStr


class ProviderFailed(Exception):
    """The model could not give a usable answer; the built-in coach answers instead."""


# What the worker thread hands the caller: a piece of text, the end, or a failure.
_END = object()


@dataclass(frozen=True)
class ChatProvider:
    base_url: str
    model: str
    api_key: SecretStr | None
    timeout_s: float

    def _request(self, messages: list[dict[str, str]], stream: bool) -> dict[str, Any]:
        return {"model": self.model, "messages": messages, "stream": stream, "temperature": 0.2}

    def _client(self) -> httpx.AsyncClient:
        headers = {"Accept": "application/json"}
        if self.api_key is not None and self.api_key.get_secret_value():
            headers["Authorization"] = f"Bearer {self.api_key.get_secret_value()}"
        return httpx.AsyncClient(
            base_url=self.base_url.rstrip("/"),
            headers=headers,
            # Each read is bounded by the deadline too; asyncio.timeout bounds the sum.
            timeout=httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 5.0)),
        )

    def complete(self, messages: list[dict[str, str]]) -> str:
        """The whole answer at once, within the deadline."""
        return "".join(self._run(self._complete(messages)))

    def stream(self, messages: list[dict[str, str]]) -> Iterator[str]:
        """The answer in pieces as the model writes them; the whole within the deadline."""
        produced = False
        for piece in self._run(self._stream(messages)):
            produced = True
            yield piece
        if not produced:
            raise ProviderFailed("the model gave an empty answer")

    def _run(self, pieces: AsyncIterator[str]) -> Iterator[str]:
        """Drive `pieces` on an event loop of its own in a worker thread, yielding what it makes;
        ProviderFailed once the deadline passes, wherever the request is."""
        deadline = time.monotonic() + self.timeout_s
        out: queue.Queue[object] = queue.Queue()
        stop = threading.Event()

        async def produce() -> None:
            try:
                async with asyncio.timeout(self.timeout_s):
                    async for piece in pieces:
                        if stop.is_set():
                            return
                        out.put(piece)
                out.put(_END)
            except TimeoutError:
                out.put(ProviderFailed("the model took longer than the time limit"))
            except ProviderFailed as exc:
                out.put(exc)
            except httpx.HTTPError as exc:
                out.put(ProviderFailed(f"the model server failed: {exc!r}"))
            except Exception as exc:  # a bug in a client library: the built-in coach answers
                out.put(ProviderFailed(f"the model call broke: {exc!r}"))

        worker = threading.Thread(target=asyncio.run, args=(produce(),), daemon=True)
        worker.start()
        try:
            while True:
                left = deadline - time.monotonic()
                try:
                    item = out.get(timeout=max(left, 0.0) + 0.5)  # the worker's own timeout first
                except queue.Empty:
                    raise ProviderFailed("the model took longer than the time limit") from None
                if item is _END:
                    return
                if isinstance(item, ProviderFailed):
                    raise item
                yield str(item)
        finally:
            stop.set()

    async def _complete(self, messages: list[dict[str, str]]) -> AsyncIterator[str]:
        async with self._client() as client:
            response = await client.post("/chat/completions", json=self._request(messages, False))
        if response.status_code != 200:
            raise ProviderFailed(f"the model server answered {response.status_code}")
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ProviderFailed("the model server's answer is not a chat completion") from exc
        if not isinstance(content, str) or not content.strip():
            raise ProviderFailed("the model gave an empty answer")
        yield content

    async def _stream(self, messages: list[dict[str, str]]) -> AsyncIterator[str]:
        async with (
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
            async for line in response.aiter_lines():
                piece = _delta(line)
                if piece is _DONE:
                    return
                if piece:
                    yield str(piece)
        raise ProviderFailed("the model's stream ended before its answer was complete")


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
