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

Memory and time are bounded whatever the server sends: a body over `max_reply_bytes` fails the
call with `ReplyTooLarge` and closes the connection (the parser, `http1_parser.py`, never holds
more than the cap plus one read), and once a response has begun, a silence of `read_timeout`
seconds fails it with `ReplyStalled`. Before the first byte there is no read timeout: a call may
wait in SGLang's queue, and the caller's deadline (which cancels the call) bounds that wait.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import cast
from urllib.parse import unquote, urlsplit

from openjev.adapters.sglang.http1_parser import (
    ConnectFailed,
    ConnectionDropped,
    HTTPFailure,
    MalformedResponse,
    Reply,
    ReplyStalled,
    ReplyTooLarge,
    ResponseParser,
)

__all__ = [
    "ConnectFailed",
    "ConnectionDropped",
    "HTTPFailure",
    "Http1Pool",
    "MalformedResponse",
    "Reply",
    "ReplyStalled",
    "ReplyTooLarge",
]

DEFAULT_MAX_REPLY_BYTES = 8 * 1024 * 1024
DEFAULT_READ_TIMEOUT = 10.0


class Http1Pool:
    """Kept-alive connections to the origin of `url`; `post(path, body)` sends to `url`'s path + `path`."""

    def __init__(
        self,
        url: str,
        *,
        limit: int,
        keepalive: float,
        connect_timeout: float,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
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
        self._max_reply_bytes = max_reply_bytes
        self._read_timeout = read_timeout
        self._clock = clock
        self._open = 0  # connections open or being opened, idle ones included
        self._idle: list[_Connection] = []
        self._waiters: deque[asyncio.Future[_Connection | None]] = deque()
        self._closed = False

    @property
    def open_connections(self) -> int:
        """Connections open or being opened, idle ones included: never more than the limit."""
        return self._open

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def idle_connections(self) -> int:
        return len(self._idle)

    @property
    def idle_usable(self) -> bool:
        """Whether every idle connection is still open (a closed one is dropped when next taken)."""
        return all(connection.usable or connection.closed_by_peer for connection in self._idle)

    @property
    def waiting(self) -> int:
        """Callers waiting for a place (a cancelled one may linger until the next hand-over)."""
        return sum(1 for waiter in self._waiters if not waiter.done())

    async def post(self, path: str, body: bytes, content_type: str = "application/json") -> Reply:
        """One exchange on a pooled connection; raises an `HTTPFailure` when no whole response came back."""
        head = (
            f"POST {self._path}{path} HTTP/1.1\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        ).encode("latin-1")
        connection = await self._acquire()
        reusable = False
        try:
            request = b"".join((head, self._fixed, b"\r\n", body))
            reply, reusable = await connection.exchange(request, self._max_reply_bytes, self._read_timeout)
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
        self.closed_by_peer = False  # the server closed it (idle): the pool drops it when it next looks
        self._transport: asyncio.Transport | None = None
        self._lost = False
        self._reply: asyncio.Future[tuple[Reply, bool]] | None = None
        self._parser: ResponseParser | None = None
        self._read_timeout = 0.0
        self._last_read = 0.0
        self._stall_timer: asyncio.TimerHandle | None = None

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
        loop = asyncio.get_running_loop()
        self._last_read = loop.time()
        if self._stall_timer is None:
            self._stall_timer = loop.call_later(self._read_timeout, self._check_stall)
        try:
            done = parser.feed(data)
        except HTTPFailure as exc:
            self._fail(exc)
            return
        except Exception as exc:  # noqa: BLE001 - nothing may escape a protocol callback: the call fails instead
            self._fail(MalformedResponse(f"unreadable response ({type(exc).__name__}: {exc})"))
            return
        if done is not None:
            reply.set_result(done)

    def _fail(self, exc: HTTPFailure) -> None:
        if self._reply is not None and not self._reply.done():
            self._reply.set_exception(exc)
        self.close()

    def _check_stall(self) -> None:
        """Fail the exchange when no byte came for `read_timeout` seconds since its response began."""
        self._stall_timer = None
        if self._reply is None or self._reply.done():
            return
        loop = asyncio.get_running_loop()
        silent = loop.time() - self._last_read
        if silent >= self._read_timeout:
            self._fail(ReplyStalled(f"the response stopped: no byte for {self._read_timeout:g} s"))
        else:
            self._stall_timer = loop.call_later(self._read_timeout - silent, self._check_stall)

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost ends the exchange

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        reply, parser = self._reply, self._parser
        if reply is None or parser is None or reply.done():
            self.closed_by_peer = reply is None
            return
        done = parser.end_of_stream()
        if done is not None:
            reply.set_result(done)
        else:
            reason = f": {exc}" if exc else ""
            reply.set_exception(ConnectionDropped(f"the server closed the connection before answering in full{reason}"))

    async def exchange(self, request: bytes, max_body: int, read_timeout: float) -> tuple[Reply, bool]:
        """Send `request`, await the whole response: (the reply, whether the connection can be reused)."""
        if not self.usable:
            raise ConnectionDropped("the connection was closed")
        assert self._transport is not None
        self._reply = asyncio.get_running_loop().create_future()
        self._parser = ResponseParser(max_body)
        self._read_timeout = read_timeout
        try:
            self._transport.write(request)
            return await self._reply
        finally:
            self._reply = None
            self._parser = None
            if self._stall_timer is not None:
                self._stall_timer.cancel()
                self._stall_timer = None

    def close(self) -> None:
        self._lost = True
        if self._transport is not None:
            self._transport.close()
