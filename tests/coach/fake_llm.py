"""A small OpenAI-compatible chat-completions server for the tests: the real protocol over HTTP
(a JSON completion, or Server-Sent Events chunks ending in `data: [DONE]`), started by the tests.

`FakeModel.mode` picks its behaviour: "ok" answers `answer`; "slow" waits `delay_s` before
answering; "garbage" answers 200 with a body that is not a completion; "error" answers 500;
"cut" streams one line and then closes the connection mid-answer; "trickle" sends a whole,
well-formed answer one small piece every `delay_s` seconds (each read is quick, the whole is slow).
Every request body it received is kept in `requests` (to check what the prompt held).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_ANSWER = (
    "Rank 1 ran the save on line 40 as well, so two ranks wrote the same file [1].\n"
    "Guard the save with a test on the rank, and keep the barrier outside it.\n"
)


@dataclass
class FakeModel:
    mode: str = "ok"
    answer: str = DEFAULT_ANSWER
    delay_s: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    authorization: list[str | None] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> FakeModel:
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_POST(self) -> None:
                if self.path != "/v1/chat/completions":
                    self.send_error(404)
                    return
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                model.requests.append(body)
                model.authorization.append(self.headers.get("Authorization"))
                model.respond(self, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def respond(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        if self.mode == "slow":
            time.sleep(self.delay_s)
        if self.mode == "error":
            _send(handler, 500, "application/json", b'{"error": {"message": "overloaded"}}')
            return
        if self.mode == "garbage":
            _send(handler, 200, "application/json", b'{"id": "x", "object": "nonsense"}')
            return
        if body.get("stream"):
            self._stream(handler, body)
            return
        completion = self.completion(body)
        if self.mode == "trickle":
            _trickle(handler, json.dumps(completion).encode(), self.delay_s)
            return
        _send(handler, 200, "application/json", json.dumps(completion).encode())

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": self.answer},
                    "finish_reason": "stop",
                }
            ],
        }

    def _stream(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.end_headers()

        def chunk(delta: dict[str, Any], finish: str | None = None) -> None:
            data = {
                "id": "chatcmpl-test",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": body.get("model"),
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            handler.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
            handler.wfile.flush()

        chunk({"role": "assistant"})
        words = self.answer.split(" ")
        for number, word in enumerate(words):
            chunk({"content": word + ("" if number == len(words) - 1 else " ")})
            if self.mode == "trickle":
                time.sleep(self.delay_s)
            if self.mode == "cut" and "\n" in word:
                handler.close_connection = True
                return
        chunk({}, finish="stop")
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()


def _send(handler: BaseHTTPRequestHandler, status: int, kind: str, payload: bytes) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", kind)
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)


TRICKLE_PIECES = 20


def _trickle(handler: BaseHTTPRequestHandler, payload: bytes, delay_s: float) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    size = max(1, len(payload) // TRICKLE_PIECES + 1)
    try:
        for start in range(0, len(payload), size):
            handler.wfile.write(payload[start : start + size])
            handler.wfile.flush()
            time.sleep(delay_s)
    except (BrokenPipeError, ConnectionResetError):
        return  # the client gave up at its deadline
