"""A local HTTP server that answers like the Hugging Face Hub, enough for `huggingface_hub` downloads.

It serves the file listing (`/api/models/OWNER/REPO/tree/REV`), file metadata (HEAD) and file
bytes (GET, with Range), gated repositories (401 + `X-Error-Code: GatedRepo` without the token),
and two failures: `cut_after` makes the next file GET send that many bytes and drop the connection
(once), `down` makes every file GET answer 503.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMMIT = "0123456789abcdef0123456789abcdef01234567"
_RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")
_TREE = re.compile(r"^/api/models/([^/]+/[^/]+)/tree/([^/?]+)")


@dataclass
class FakeHub:
    repos: dict[str, dict[str, bytes]] = field(default_factory=dict)
    gated: dict[str, str] = field(default_factory=dict)  # repo -> the token it needs
    cut_after: int | None = None
    down: bool = False
    file_gets: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range header)
    url: str = ""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hub: FakeHub  # set on the subclass made for each server

    def log_message(self, *_: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _error(self, status: int, code: str, message: str) -> None:
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _allowed(self, repo: str) -> bool:
        if repo not in self.hub.repos:
            self._error(404, "RepoNotFound", "Repository not found")
            return False
        token = self.hub.gated.get(repo)
        if token is not None and self.headers.get("authorization") != f"Bearer {token}":
            self._error(401, "GatedRepo", "Access to this model is restricted")
            return False
        return True

    def _answer(self, *, body: bool) -> None:
        tree = _TREE.match(self.path)
        resolve = _RESOLVE.match(self.path.split("?")[0])
        if tree:
            if self._allowed(tree.group(1)):
                listing = [
                    {"type": "file", "path": p, "size": len(b), "oid": hashlib.sha1(b).hexdigest()}
                    for p, b in self.hub.repos[tree.group(1)].items()
                ]
                self._send(200, json.dumps(listing).encode(), {"Content-Type": "application/json"}, body=body)
        elif not resolve:
            self._error(404, "EntryNotFound", "no such route")
        elif self._allowed(resolve.group(1)):
            self._file(resolve.group(1), resolve.group(3), body=body)

    def _file(self, repo: str, name: str, *, body: bool) -> None:
        hub = self.hub
        data = hub.repos[repo].get(name)
        if data is None:
            self._error(404, "EntryNotFound", "Entry not found")
            return
        headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{hashlib.sha256(data).hexdigest()}"'}
        if not body:
            self._send(200, data, headers, body=False)
            return
        span = self.headers.get("range")
        hub.file_gets.append((name, span))
        if hub.down:
            self._error(503, "Unavailable", "the test hub is down")
            return
        if hub.cut_after is not None:
            cut, hub.cut_after = hub.cut_after, None
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data[:cut])
            self.wfile.flush()
            self.close_connection = True
            return
        start = int(span.removeprefix("bytes=").removesuffix("-")) if span else 0
        if start:
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        self._send(206 if start else 200, data[start:], headers, body=True)

    def _send(self, status: int, data: bytes, headers: dict[str, str], *, body: bool) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if body:
            self.wfile.write(data)


@contextmanager
def fake_hub(hub: FakeHub) -> Iterator[FakeHub]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_Handler,), {"hub": hub}))
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
