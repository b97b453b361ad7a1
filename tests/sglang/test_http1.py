"""The lean HTTP/1.1 client of /generate: framing, connection reuse and limits, failures, cancellation."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest
import uvloop
from hypothesis import given, settings
from hypothesis import strategies as st

from openjev.adapters.sglang.http1 import (
    ConnectFailed,
    ConnectionDropped,
    Http1Pool,
    MalformedResponse,
    Reply,
    ReplyTooLarge,
)

OK = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{"ok": true}'
CLOSE = b""  # a scripted answer that closes the connection instead of writing


@dataclass
class Received:
    connection: int
    head: bytes
    body: bytes


@dataclass
class Scripted:
    """A server that answers each request with the next scripted answer: pieces written one by one.

    An answer's pieces are written with a pause between them (so they arrive separately); an empty
    piece closes the connection there. `hold` keeps the next answer back until it is set.
    """

    answers: list[list[bytes]] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    connections: int = 0
    closed_by_client: int = 0
    hold: asyncio.Event | None = None
    port: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def until(self, done: Callable[[], bool]) -> None:
        """Wait until `done()` holds (checked after every request received and every connection ended)."""
        async with asyncio.timeout(5):
            while not done():
                self.changed.clear()
                await self.changed.wait()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                body = await reader.readexactly(length)
                self.received.append(Received(number, head, body))
                self.changed.set()
                if self.hold is not None:
                    await self.hold.wait()
                for piece in self.answers.pop(0) if self.answers else [OK]:
                    if piece == CLOSE:
                        writer.close()
                        return
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0.01)
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed_by_client += 1
            self.changed.set()
        except asyncio.CancelledError:
            pass  # the test is over: end quietly
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def scripted(*answers: list[bytes]) -> AsyncIterator[Scripted]:
    script = Scripted(answers=list(answers))
    server = await asyncio.start_server(script.handle, "127.0.0.1", 0)
    script.port = server.sockets[0].getsockname()[1]
    try:
        yield script
    finally:
        server.close()


def pool(script: Scripted, path: str = "", **options: object) -> Http1Pool:
    settings: dict[str, object] = {"limit": 4, "keepalive": 4.0, "connect_timeout": 5.0, **options}
    return Http1Pool(f"http://127.0.0.1:{script.port}{path}", **settings)  # type: ignore[arg-type]


@dataclass
class ClosedWhileBusy:
    client: Http1Pool
    busy: asyncio.Future[Reply]  # holds the one connection: its reply waits for `reply_held`
    waiting: asyncio.Future[Reply]  # was waiting for that connection when the pool closed
    reply_held: asyncio.Event


async def closed_while_busy(script: Scripted) -> ClosedWhileBusy:
    """A one-connection pool closed while one call holds its connection and a second call waits."""
    script.hold = asyncio.Event()
    client = pool(script, limit=1)
    busy = asyncio.ensure_future(client.post("/generate", b"1"))
    waiting = asyncio.ensure_future(client.post("/generate", b"2"))
    await script.until(lambda: len(script.received) == 1)
    await client.close()
    return ClosedWhileBusy(client, busy, waiting, script.hold)


async def test_the_request_is_one_post_with_its_length_and_the_fixed_headers() -> None:
    async with scripted() as script:
        client = pool(script, "/base", headers={"Authorization": "Bearer k"})
        reply = await client.post("/generate", b'{"input_ids": [1]}')
        await client.close()
    assert reply == Reply(200, b'{"ok": true}')
    (received,) = script.received
    lines = received.head.decode().split("\r\n")
    assert lines[0] == "POST /base/generate HTTP/1.1"
    assert set(lines[1:-2]) == {
        "Content-Type: application/json",
        "Content-Length: 18",
        f"Host: 127.0.0.1:{script.port}",
        "Accept-Encoding: identity",
        "Authorization: Bearer k",
    }
    assert received.body == b'{"input_ids": [1]}'


def test_credentials_in_the_url_become_basic_auth_unless_a_key_is_given() -> None:
    basic = Http1Pool("http://user:p%40ss@127.0.0.1:1", limit=1, keepalive=1, connect_timeout=1)
    keyed = Http1Pool(
        "http://user:pass@127.0.0.1:1", limit=1, keepalive=1, connect_timeout=1, headers={"Authorization": "Bearer k"}
    )
    assert b"Authorization: Basic dXNlcjpwQHNz\r\n" in basic._fixed
    assert b"Host: 127.0.0.1:1\r\n" in basic._fixed
    assert b"Authorization: Bearer k\r\n" in keyed._fixed
    assert b"Basic" not in keyed._fixed


async def test_one_connection_serves_calls_one_after_another() -> None:
    async with scripted() as script:
        client = pool(script)
        for _ in range(3):
            assert (await client.post("/generate", b"{}")).status == 200
        await client.close()
    assert [r.connection for r in script.received] == [1, 1, 1]


@pytest.mark.parametrize(
    "pieces",
    [
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n3;ext=1\r\nefg\r\n0\r\n\r\n"],
        # Every byte on its own, a trailer after the last chunk.
        [
            bytes([b])
            for b in b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\nabcd\r\n3\r\nefg\r\n0\r\nT: 1\r\n\r\n"
        ],
        [b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nabcdefg"],
        [b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nabc", b"defg"],
    ],
    ids=["chunked", "chunked-byte-by-byte", "interim-response-first", "split-body"],
)
async def test_replies_framed_by_length_or_chunks_arrive_whole_and_keep_the_connection(pieces: list[bytes]) -> None:
    async with scripted(pieces) as script:
        client = pool(script)
        async with asyncio.timeout(5):
            assert await client.post("/generate", b"{}") == Reply(200, b"abcdefg")
        assert (await client.post("/generate", b"{}")).status == 200
        await client.close()
    assert [r.connection for r in script.received] == [1, 1]


@pytest.mark.parametrize(
    "pieces",
    [
        [b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 4\r\n\r\nbusy"],
        [b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy"],
        [b"HTTP/1.1 503 Service Unavailable\r\n\r\nbu", b"sy", CLOSE],  # framed by the close
    ],
    ids=["connection-close", "http-1.0", "until-close"],
)
async def test_a_reply_that_ends_the_connection_is_read_and_the_next_call_opens_another(pieces: list[bytes]) -> None:
    async with scripted(pieces) as script:
        client = pool(script)
        assert await client.post("/generate", b"{}") == Reply(503, b"busy")
        assert (await client.post("/generate", b"{}")).status == 200
        await client.close()
    assert [r.connection for r in script.received] == [1, 2]


@pytest.mark.parametrize(
    ("pieces", "error", "message"),
    [
        ([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", CLOSE], ConnectionDropped, "closed the connection"),
        ([CLOSE], ConnectionDropped, "closed the connection"),
        ([b"SSH-2.0-OpenSSH\r\n\r\n"], MalformedResponse, "status line"),
        ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n"], MalformedResponse, "chunk"),
        ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n"], MalformedResponse, "chunk"),
        ([b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc"], MalformedResponse, "gzip"),
        ([b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"], MalformedResponse, "Length"),
        ([b"HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\nabc"], MalformedResponse, "Length"),
        ([b"HTTP/1.1 200 OK\r\nbroken header\r\n\r\n"], MalformedResponse, "header"),
    ],
)
async def test_a_cut_or_malformed_reply_fails_the_call_and_the_next_call_gets_a_fresh_connection(
    pieces: list[bytes], error: type[Exception], message: str
) -> None:
    async with scripted(pieces) as script:
        client = pool(script)
        with pytest.raises(error, match=message):
            await client.post("/generate", b"{}")
        assert (await client.post("/generate", b"{}")).status == 200
        await client.close()
    assert [r.connection for r in script.received] == [1, 2]


async def test_extra_bytes_after_a_reply_retire_the_connection() -> None:
    async with scripted([OK + b"HTTP/1.1 200 OK\r\n"]) as script:
        client = pool(script)
        assert (await client.post("/generate", b"{}")).status == 200
        assert (await client.post("/generate", b"{}")).status == 200
        await client.close()
    assert [r.connection for r in script.received] == [1, 2]


async def test_a_connection_idle_too_long_or_closed_by_the_server_is_not_reused() -> None:
    now = [0.0]
    async with scripted([OK], [OK, CLOSE]) as script:
        client = pool(script, keepalive=4.0, clock=lambda: now[0])
        await client.post("/generate", b"{}")
        now[0] = 4.0  # idle for the whole keep-alive time: closed, a new connection is opened
        await client.post("/generate", b"{}")
        await asyncio.sleep(0.1)  # the server closes that one after answering
        await client.post("/generate", b"{}")
        assert client.open_connections == 1
        await client.close()
        assert client.open_connections == 0
    assert [r.connection for r in script.received] == [1, 2, 3]


async def test_callers_beyond_the_limit_wait_their_turn() -> None:
    async with scripted() as script:
        script.hold = asyncio.Event()
        client = pool(script, limit=2)
        calls = [asyncio.ensure_future(client.post("/generate", b"%d" % i)) for i in range(5)]
        await script.until(lambda: len(script.received) == 2)
        assert script.connections == 2
        assert client.open_connections == 2
        script.hold.set()
        assert [reply.status for reply in await asyncio.gather(*calls)] == [200] * 5
        await client.close()
    assert script.connections == 2
    assert [r.body for r in script.received] == [b"%d" % i for i in range(5)]


async def test_a_cancelled_call_closes_its_connection_and_frees_its_place() -> None:
    async with scripted() as script:
        script.hold = asyncio.Event()
        client = pool(script, limit=1)
        first = asyncio.ensure_future(client.post("/generate", b"1"))
        waiting = asyncio.ensure_future(client.post("/generate", b"2"))  # waits for the only place
        third = asyncio.ensure_future(client.post("/generate", b"3"))
        await script.until(lambda: len(script.received) == 1)
        waiting.cancel()
        first.cancel()
        for task in (first, waiting):
            with pytest.raises(asyncio.CancelledError):
                await task
        script.hold.set()
        assert (await asyncio.wait_for(third, 5)).status == 200
        assert client.open_connections == 1
        await script.until(lambda: script.closed_by_client == 1)  # the cancelled call's connection ended
        await client.close()
    assert [(r.connection, r.body) for r in script.received] == [(1, b"1"), (2, b"3")]


async def test_nothing_listening_is_a_connect_failure_and_gives_the_place_back() -> None:
    async with scripted() as script:
        port = script.port
    client = Http1Pool(f"http://127.0.0.1:{port}", limit=1, keepalive=4, connect_timeout=5)
    for _ in range(2):
        with pytest.raises(ConnectFailed):
            await client.post("/generate", b"{}")
    assert client.open_connections == 0


async def test_a_closed_pool_refuses_calls_and_fails_its_waiters() -> None:
    async with scripted() as script:
        closed = await closed_while_busy(script)
        with pytest.raises(ConnectFailed, match="closed"):
            await closed.waiting
        closed.reply_held.set()
        assert (await closed.busy).status == 200
        assert closed.client.open_connections == 0
        with pytest.raises(ConnectFailed, match="closed"):
            await closed.client.post("/generate", b"{}")


def test_it_runs_on_uvloop_as_the_server_does() -> None:
    async def exchange() -> list[Reply]:
        async with scripted([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n"]) as script:
            client = pool(script)
            replies = [await client.post("/generate", b"{}") for _ in range(2)]
            await client.close()
            return replies

    assert uvloop.run(exchange()) == [Reply(200, b"a"), Reply(200, b'{"ok": true}')]


def test_only_http_urls_are_taken() -> None:
    def make(url: str) -> Http1Pool:
        return Http1Pool(url, limit=1, keepalive=1, connect_timeout=1)

    with pytest.raises(ValueError, match="http"):
        make("ftp://127.0.0.1:1")
    assert make("https://example.org")._port == 443
    assert make("http://[::1]:8080/x")._fixed.startswith(b"Host: [::1]:8080\r\n")


async def test_a_waiter_cancelled_after_the_pool_closed_just_ends() -> None:
    async with scripted() as script:
        closed = await closed_while_busy(script)
        closed.waiting.cancel()  # the close failed the waiter; it is cancelled before it runs
        with pytest.raises(asyncio.CancelledError):
            await closed.waiting
        closed.reply_held.set()
        assert (await closed.busy).status == 200
        assert closed.client.open_connections == 0


# -- the pool's invariant, whatever the calls meet --------------------------------------------------

ANSWERS = {
    b"ok": [OK],
    b"chunked": [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"],
    b"cut": [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", CLOSE],
    b"garbage": [b"SSH-2.0-OpenSSH\r\n\r\n"],
    b"huge": [b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n"],
    b"close": [b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"],
    b"slow": [OK],
}
EXPECTED: dict[bytes, type[BaseException] | None] = {
    b"ok": None, b"chunked": None, b"close": None, b"slow": None, b"cut": ConnectionDropped,
    b"garbage": MalformedResponse, b"huge": ReplyTooLarge, b"cancel": asyncio.CancelledError,
}  # fmt: skip


async def answer_by_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers each request as its body says (`ANSWERS`); `slow` and `cancel` wait first."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            kind = await reader.readexactly(length)
            await asyncio.sleep({b"slow": 0.02, b"cancel": 0.5}.get(kind, 0.0))
            for piece in ANSWERS.get(kind, [OK]):
                if piece == CLOSE:
                    return
                writer.write(piece)
                await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


def invariant_violations(client: Http1Pool) -> list[str]:
    found = []
    if client.open_connections > client.limit:
        found.append(f"{client.open_connections} open connections, the limit is {client.limit}")
    if client.idle_connections > client.open_connections:
        found.append("more idle connections than open ones")
    if client.waiting and (client.idle_connections or client.open_connections < client.limit):
        found.append(f"{client.waiting} waiting while a place is free")
    if not client.idle_usable:
        found.append("an idle connection that is closed")
    return found


async def run_calls(limit: int, kinds: list[bytes]) -> None:
    server = await asyncio.start_server(answer_by_body, "127.0.0.1", 0)
    client = Http1Pool(
        f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", limit=limit, keepalive=4, connect_timeout=5,
        max_reply_bytes=1024 * 1024,
    )  # fmt: skip
    violations: list[str] = []
    watching = True

    async def watch() -> None:
        while watching:
            violations.extend(invariant_violations(client))
            await asyncio.sleep(0)

    async def call(kind: bytes) -> None:
        if kind == b"cancel":
            task = asyncio.ensure_future(client.post("/generate", kind))
            await asyncio.sleep(0.01)
            task.cancel()
            await task
        else:
            reply = await client.post("/generate", kind)
            assert reply.status == 200

    watcher = asyncio.ensure_future(watch())
    try:
        async with asyncio.timeout(10):  # every waiter is served: nothing hangs
            outcomes = await asyncio.gather(*(call(kind) for kind in kinds), return_exceptions=True)
        for kind, outcome in zip(kinds, outcomes, strict=True):
            expected = EXPECTED[kind]
            assert (outcome is None) if expected is None else isinstance(outcome, expected), (kind, outcome)
        # Idle connections are usable: as many calls as the limit, at once, all answered.
        assert [r.status for r in await asyncio.gather(*(client.post("/generate", b"ok") for _ in range(limit)))] == [
            200
        ] * limit
        assert client.open_connections == client.idle_connections <= limit
    finally:
        watching = False
        await watcher
        await client.close()
        server.close()
    assert client.open_connections == 0
    assert violations == []


@settings(max_examples=30)
@given(st.integers(1, 3), st.lists(st.sampled_from(sorted(EXPECTED)), min_size=1, max_size=12))
def test_the_pool_never_exceeds_its_limit_keeps_usable_idle_connections_and_serves_every_waiter(
    limit: int, kinds: list[bytes]
) -> None:
    asyncio.run(run_calls(limit, kinds))
