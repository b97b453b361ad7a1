"""An HTTP/1.x response, parsed as its bytes arrive, with every part bounded; no I/O.

`ResponseParser.feed` takes bytes as they come off the socket, in pieces of any size, and returns
the reply once it is complete. What it holds never grows past the caller's cap on the body plus
one piece: a Content-Length over the cap fails at the head, before any body byte is read; a chunk
that would take the decoded body over the cap fails at its size line; a body framed by the close
fails as soon as it passes the cap. The head, a chunk's size line and the trailer have fixed caps.
"""

from __future__ import annotations

import re
from typing import NamedTuple

MAX_HEAD_BYTES = 64 * 1024  # status line and headers of a response, and a chunked trailer
MAX_CHUNK_LINE_BYTES = 1024  # a chunk's size line, extensions included
MAX_INTERIM_RESPONSES = 16  # 1xx heads before the real one (100 Continue, 103 Early Hints)
_NO_BODY = frozenset({204, 304})
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
_CONTENT_LENGTH = re.compile(r"[0-9]{1,19}")  # ASCII digits only: str.isdigit() takes "²" and "١"


class HTTPFailure(Exception):
    """A call that got no complete response."""


class ConnectFailed(HTTPFailure):
    """No connection could be opened (refused, unreachable, timed out)."""


class ConnectionDropped(HTTPFailure):
    """The connection closed before the whole response arrived."""


class MalformedResponse(HTTPFailure):
    """The bytes that came back are not an HTTP/1.x response this client can read."""


class ReplyTooLarge(HTTPFailure):
    """The response's body is larger than the caller's cap (declared so, or sent so)."""


class ReplyStalled(HTTPFailure):
    """The response began, then no byte came for longer than the read timeout."""


class Reply(NamedTuple):
    status: int
    body: bytes


class ResponseParser:
    """One HTTP/1.x response: `feed` returns (reply, reusable) once it is complete, None until then."""

    def __init__(self, max_body: int) -> None:
        self._max_body = max_body
        self._buffer = bytearray()
        self._status = 0
        self._interim = 0
        self._head_read = False  # the head is then gone from the buffer: the body (or its chunks) begins it
        self._length: int | None = None  # Content-Length framing
        self._chunked = False
        self._until_close = False
        self._keep_alive = False
        self._chunks = bytearray()  # chunked framing: the body decoded so far

    @property
    def held(self) -> int:
        """Bytes held: what arrived and is not yet parsed, plus the decoded chunks."""
        return len(self._buffer) + len(self._chunks)

    def feed(self, data: bytes) -> tuple[Reply, bool] | None:
        self._buffer += data
        while not self._head_read:
            if not self._read_head():
                return None
        if self._chunked:
            return self._read_chunks()
        if self._length is not None:
            end = self._length
            if len(self._buffer) < end:
                return None
            reusable = self._keep_alive and len(self._buffer) == end
            return Reply(self._status, bytes(self._buffer[:end])), reusable
        if len(self._buffer) > self._max_body:
            raise ReplyTooLarge(f"the response body (framed by the close) passed {self._max_body} bytes")
        return None  # framed by the close: `end_of_stream` completes it

    def end_of_stream(self) -> tuple[Reply, bool] | None:
        """The reply when the server's close ends it (no length, no chunks), else None (cut short)."""
        if self._head_read and self._until_close:
            return Reply(self._status, bytes(self._buffer)), False
        return None

    def _read_head(self) -> bool:
        """Parse a status line and headers once they are all in (False until then); 1xx heads are dropped."""
        end = self._buffer.find(b"\r\n\r\n")
        if (end < 0 and len(self._buffer) > MAX_HEAD_BYTES) or end > MAX_HEAD_BYTES:
            raise MalformedResponse(f"the response head is larger than {MAX_HEAD_BYTES} bytes")
        if end < 0:
            return False
        lines = bytes(self._buffer[:end]).decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if version not in ("HTTP/1.1", "HTTP/1.0") or not re.fullmatch(r"[0-9]{3}", code) or rest[3:4] not in ("", " "):
            raise MalformedResponse(f"not an HTTP/1.x status line: {lines[0][:100]!r}")
        status = int(code)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise MalformedResponse(f"malformed header line: {line[:100]!r}")
            key, value = name.lower(), value.strip()
            if key in headers and key == "content-length" and headers[key] != value:
                raise MalformedResponse("conflicting Content-Length headers")
            headers[key] = f"{headers[key]}, {value}" if key in headers and key != "content-length" else value
        del self._buffer[: end + 4]
        if 100 <= status < 200:
            self._interim += 1
            if self._interim > MAX_INTERIM_RESPONSES:
                raise MalformedResponse(f"more than {MAX_INTERIM_RESPONSES} interim (1xx) responses")
            return True  # an interim response: the real one follows
        self._status = status
        self._head_read = True
        self._frame(version, headers)
        return True

    def _frame(self, version: str, headers: dict[str, str]) -> None:
        connection = {token.strip().lower() for token in headers.get("connection", "").split(",")}
        self._keep_alive = version == "HTTP/1.1" and "close" not in connection
        encoding = headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise MalformedResponse(f"the response is {encoding}-encoded although identity was asked for")
        transfer = [token.strip().lower() for token in headers.get("transfer-encoding", "").split(",") if token.strip()]
        if transfer:
            if transfer != ["chunked"]:
                raise MalformedResponse(f"unsupported Transfer-Encoding {headers['transfer-encoding']!r}")
            self._chunked = True
        elif self._status in _NO_BODY:
            self._length = 0
        elif "content-length" in headers:
            value = headers["content-length"]
            if not _CONTENT_LENGTH.fullmatch(value):
                raise MalformedResponse(f"invalid Content-Length {value[:40]!r}")
            self._length = int(value)
            if self._length > self._max_body:
                raise ReplyTooLarge(f"the response declares {self._length} bytes, more than {self._max_body}")
        else:
            self._until_close = True
            self._keep_alive = False

    def _read_chunks(self) -> tuple[Reply, bool] | None:
        """Decode every whole chunk in the buffer; the reply once the last chunk and the trailer are in."""
        buffer = self._buffer
        while True:
            line_end = buffer.find(b"\r\n", 0, MAX_CHUNK_LINE_BYTES + 2)
            if line_end < 0:
                if len(buffer) > MAX_CHUNK_LINE_BYTES:
                    raise MalformedResponse("a chunk size line is too long")
                return None
            field = bytes(buffer[:line_end]).split(b";", 1)[0].strip()
            if not _CHUNK_SIZE.fullmatch(field):
                raise MalformedResponse(f"invalid chunk size {field[:40]!r}")
            size = int(field, 16)
            if len(self._chunks) + size > self._max_body:
                raise ReplyTooLarge(f"the chunked response body passes {self._max_body} bytes")
            if size == 0:
                end = self._trailer_end(line_end + 2)
                if end is None:
                    return None
                return Reply(self._status, bytes(self._chunks)), self._keep_alive and len(buffer) == end
            data_end = line_end + 2 + size
            if len(buffer) < data_end + 2:
                return None
            if buffer[data_end : data_end + 2] != b"\r\n":
                raise MalformedResponse("a chunk does not end where its size says")
            self._chunks += buffer[line_end + 2 : data_end]
            del buffer[: data_end + 2]

    def _trailer_end(self, start: int) -> int | None:
        """Where the response ends: after the trailer lines (ignored) from `start` and an empty line."""
        if self._buffer[start : start + 2] == b"\r\n":
            return start + 2
        found = self._buffer.find(b"\r\n\r\n", start)
        if (found < 0 and len(self._buffer) - start > MAX_HEAD_BYTES) or found - start > MAX_HEAD_BYTES:
            raise MalformedResponse("the chunked trailer is too large")
        if found < 0:
            return None
        return found + 4
