"""The team's channel for e2e runs: a Slack-style incoming webhook on loopback that keeps every message.

Used by the fault storm (bench/storm.py) and the hosts tests of the supervisor: what the supervisor and the
aggregator post (`{"text": ...}`) is kept in order in `texts`, so a scenario can judge the messages the team
would have read.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    """A Slack-style incoming webhook on 127.0.0.1 (a free port) that keeps every message's text."""

    def __init__(self) -> None:
        texts: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                texts.append(json.loads(body)["text"])
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                return

        self.texts = texts
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
