"""A local HTTP server (stdlib `http.server` in a thread) for the engine-route tests.

Each test gives it a `respond(method, path, headers, body) -> (status, json_body)` function that
follows the engine's documented request and response shapes; the server records every request.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Respond = Callable[[str, str, dict[str, str], Any], tuple[int, Any]]


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class StubServer:
    url: str
    requests: list[Recorded] = field(default_factory=list)


@contextmanager
def stub_server(respond: Respond) -> Iterator[StubServer]:
    """Serve `respond` on 127.0.0.1 (a free port) for the duration of the block."""
    holder: dict[str, StubServer] = {}

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            headers = {k.lower(): v for k, v in self.headers.items()}
            holder["server"].requests.append(Recorded(self.command, self.path, headers, body))
            status, answer = respond(self.command, self.path, headers, body)
            data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = _handle

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder["server"] = StubServer(url=f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder["server"]
    finally:
        server.shutdown()
        server.server_close()


def closed_port_url() -> str:
    """A URL nothing listens on (a port bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _bigrams(text: str) -> set[str]:
    squashed = "".join(text.split())
    return {squashed[i : i + 2] for i in range(len(squashed) - 1)}


def tei_bigram_rerank(method: str, path: str, headers: dict[str, str], body: Any) -> tuple[int, Any]:
    """A TEI `/rerank` responder: `{query, texts}` → `[{index, score}]`, best first (as TEI answers).
    A text's score, in [0, 1], is the share of the query's character bigrams (white space dropped)
    it holds: meaningless as relevance, but deterministic and spread out."""
    query = _bigrams(body["query"])
    scores = [len(query & _bigrams(text)) / max(1, len(query)) for text in body["texts"]]
    return 200, [{"index": i, "score": s} for i, s in sorted(enumerate(scores), key=lambda p: -p[1])]
