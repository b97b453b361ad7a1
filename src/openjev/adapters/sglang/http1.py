"""POSTs of JSON bytes over kept-alive HTTP/1.1 connections: the SGLang adapter's /generate calls.

aiohttp spent about 150 µs of CPU on each call (request and response objects, header multidicts,
the payload registry, tracing signals, a stream reader), twice per API request. A /generate call
needs much less: write one request of known length, read one response framed by Content-Length
or chunked encoding (or, failing both, by the server closing). This does that and nothing else;
SGLang's other routes (health, info, abort) stay on aiohttp.

At most `limit` connections are open at once; a caller beyond waits, first come first served.
Idle connections are reused last in, first out, except one idle longer than `keepalive` seconds,
which is closed instead (the server may be closing it: SGLang's uvicorn drops idle ones after
5 s). A connection whose exchange did not end cleanly (cancelled, failed, `Connection: close`,
framed by the close, unexpected bytes) is closed, never reused. No redirects, cookies, proxies or
compression (`Accept-Encoding: identity`), as the aiohttp session had none.
"""

from __future__ import annotations

import asyncio
import base64
import re
import ssl
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import NamedTuple, cast
from urllib.parse import unquote, urlsplit

MAX_HEAD_BYTES = 64 * 1024  # status line and headers of a response
MAX_CHUNK_LINE_BYTES = 1024  # a chunk's size line, extensions included
_NO_BODY = frozenset({204, 304})
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")


class HTTPFailure(Exception):
    """A call that got no complete response."""


class ConnectFailed(HTTPFailure):
    """No connection could be opened (refused, unreachable, timed out)."""


class ConnectionDropped(HTTPFailure):
    """The connection closed before the whole response arrived."""


class MalformedResponse(HTTPFailure):
    """The bytes that came back are not an HTTP/1.x response this client can read."""


class Reply(NamedTuple):
    status: int
    body: bytes


class Http1Pool:
    """Kept-alive connections to the origin of `url`; `post(path, body)` sends to `url`'s path + `path`."""

    def __init__(
        self,
        url: str,
        *,
        limit: int,
        keepalive: float,
        connect_timeout: float,
        headers: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"expected an http(s) URL, got {url!r}")
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self._path = parts.path.rstrip("/")
        fixed = {"Host": parts.netloc.rpartition("@")[2], "Accept-Encoding": "identity", **(headers or {})}
        if parts.username is not None and not any(k.lower() == "authorization" for k in fixed):
            credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            fixed["Authorization"] = "Basic " + base64.b64encode(credentials).decode()
        self._fixed = "".join(f"{name}: {value}\r\n" for name, value in fixed.items()).encode("latin-1")
        self._limit = limit
        self._keepalive = keepalive
        self._connect_timeout = connect_timeout
        self._clock = clock
        self._open = 0  # connections open or being opened, idle ones included
        self._idle: list[_Connection] = []
        self._waiters: deque[asyncio.Future[_Connection | None]] = deque()
        self._closed = False

    @property
    def open_connections(self) -> int:
        return self._open

    async def post(self, path: str, body: bytes, content_type: str = "application/json") -> Reply:
        """One exchange on a pooled connection; raises an `HTTPFailure` when no whole response came back."""
        head = (
            f"POST {self._path}{path} HTTP/1.1\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        ).encode("latin-1")
        connection = await self._acquire()
        reusable = False
        try:
            reply, reusable = await connection.exchange(b"".join((head, self._fixed, b"\r\n", body)))
            return reply
        finally:
            self._release(connection, reusable)

    async def close(self) -> None:
        """Close every idle connection and fail every waiter; busy ones close when their exchange ends."""
        self._closed = True
        waiters, self._waiters = self._waiters, deque()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(ConnectFailed("the connection pool is closed"))
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
            self._open -= 1

    # -- the pool ---------------------------------------------------------------------------------

    async def _acquire(self) -> _Connection:
        if self._closed:
            raise ConnectFailed("the connection pool is closed")
        if not self._waiters:
            connection = self._take_idle()
            if connection is not None:
                return connection
            if self._open < self._limit:
                self._open += 1
                return await self._connect()
        waiter: asyncio.Future[_Connection | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            handed = await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._hand_on(waiter.result())  # handed a place, then cancelled: pass it on
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
            raise
        return handed if handed is not None else await self._connect()

    def _take_idle(self) -> _Connection | None:
        now = self._clock()
        while self._idle:
            connection = self._idle.pop()
            if connection.usable and now - connection.idle_since < self._keepalive:
                return connection
            connection.close()
            self._open -= 1
        return None

    async def _connect(self) -> _Connection:
        """A new connection in a place already counted in `_open` (given back if connecting fails)."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, connection = await loop.create_connection(_Connection, self._host, self._port, ssl=self._ssl)
        except TimeoutError:
            self._hand_on(None)
            raise ConnectFailed("connection timed out") from None
        except OSError as exc:
            self._hand_on(None)
            raise ConnectFailed(str(exc)) from None
        except BaseException:
            self._hand_on(None)
            raise
        return connection

    def _release(self, connection: _Connection, reusable: bool) -> None:
        if reusable and connection.usable and not self._closed:
            connection.idle_since = self._clock()
            self._hand_on(connection)
        else:
            connection.close()
            self._hand_on(None)

    def _hand_on(self, connection: _Connection | None) -> None:
        """Give a connection, or the place of a closed one (None), to the first waiter, else keep it."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(connection)  # None: the waiter opens a connection in this place
                return
        if connection is None:
            self._open -= 1
        elif self._closed:
            connection.close()
            self._open -= 1
        else:
            self._idle.append(connection)


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: one exchange at a time, the response parsed as its bytes arrive."""

    def __init__(self) -> None:
        self.idle_since = 0.0
        self._transport: asyncio.Transport | None = None
        self._lost = False
        self._reply: asyncio.Future[tuple[Reply, bool]] | None = None
        self._parser: _ResponseParser | None = None

    @property
    def usable(self) -> bool:
        return not self._lost and self._transport is not None and not self._transport.is_closing()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is no asyncio.Transport subclass

    def data_received(self, data: bytes) -> None:
        reply, parser = self._reply, self._parser
        if reply is None or parser is None or reply.done():
            self.close()  # bytes nobody asked for: this connection cannot be trusted any more
            return
        try:
            done = parser.feed(data)
        except MalformedResponse as exc:
            reply.set_exception(exc)
            self.close()
            return
        if done is not None:
            reply.set_result(done)

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost ends the exchange

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        reply, parser = self._reply, self._parser
        if reply is None or parser is None or reply.done():
            return
        done = parser.end_of_stream()
        if done is not None:
            reply.set_result(done)
        else:
            reason = f": {exc}" if exc else ""
            reply.set_exception(ConnectionDropped(f"the server closed the connection before answering in full{reason}"))

    async def exchange(self, request: bytes) -> tuple[Reply, bool]:
        """Send `request`, await the whole response: (the reply, whether the connection can be reused)."""
        if not self.usable:
            raise ConnectionDropped("the connection was closed")
        assert self._transport is not None
        self._reply = asyncio.get_running_loop().create_future()
        self._parser = _ResponseParser()
        try:
            self._transport.write(request)
            return await self._reply
        finally:
            self._reply = None
            self._parser = None

    def close(self) -> None:
        self._lost = True
        if self._transport is not None:
            self._transport.close()


class _ResponseParser:
    """An HTTP/1.x response, fed as it arrives: `feed` returns (reply, reusable) once it is complete."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._status = 0
        self._head_read = False  # the head is then gone from the buffer: the body (or its chunks) begins it
        self._length: int | None = None  # Content-Length framing
        self._chunked = False
        self._until_close = False
        self._keep_alive = False
        self._chunks = bytearray()  # chunked framing: the body decoded so far

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
        return None  # framed by the close: `end_of_stream` completes it

    def end_of_stream(self) -> tuple[Reply, bool] | None:
        """The reply when the server's close ends it (no length, no chunks), else None (cut short)."""
        if self._head_read and self._until_close:
            return Reply(self._status, bytes(self._buffer)), False
        return None

    def _read_head(self) -> bool:
        """Parse a status line and headers once they are all in (False until then); 1xx heads are dropped."""
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buffer) > MAX_HEAD_BYTES:
                raise MalformedResponse(f"the response head is larger than {MAX_HEAD_BYTES} bytes")
            return False
        lines = bytes(self._buffer[:end]).decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if (
            version not in ("HTTP/1.1", "HTTP/1.0")
            or len(code) != 3
            or not code.isdigit()
            or rest[3:4] not in ("", " ")
        ):
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
            return True  # an interim response (100 Continue, 103 Early Hints): the real one follows
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
            if not value.isdigit():
                raise MalformedResponse(f"invalid Content-Length {value[:40]!r}")
            self._length = int(value)
        else:
            self._until_close = True
            self._keep_alive = False

    def _read_chunks(self) -> tuple[Reply, bool] | None:
        """Decode every whole chunk in the buffer; the reply once the last chunk and the trailer are in."""
        buffer = self._buffer
        while True:
            line_end = buffer.find(b"\r\n")
            if line_end < 0:
                if len(buffer) > MAX_CHUNK_LINE_BYTES:
                    raise MalformedResponse("a chunk size line is too long")
                return None
            field = bytes(buffer[:line_end]).split(b";", 1)[0].strip()
            if not _CHUNK_SIZE.fullmatch(field):
                raise MalformedResponse(f"invalid chunk size {field[:40]!r}")
            size = int(field, 16)
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
        if found < 0:
            if len(self._buffer) - start > MAX_HEAD_BYTES:
                raise MalformedResponse("the chunked trailer is too large")
            return None
        return found + 4
