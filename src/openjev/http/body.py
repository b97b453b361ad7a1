"""Read a request body with the size limit applied to the bytes received AND to the inflated bytes.

A small zstd or gzip bomb is refused as soon as its output passes the limit, never inflated in full.
Inflation is linear in the body (the input is fed in bounded pieces, so a body of many tiny frames
is never copied once a frame), caps the number of frames or members, and runs in a worker thread:
the event loop keeps answering while a body is inflated.

Reading has a deadline and, after a short grace, a minimum average rate: a client that trickles
its body gets a 408 instead of holding a connection and a request open for ever. A body that ends
early (malformed chunked encoding, fewer bytes than Content-Length) is a 400.
"""

from __future__ import annotations

import asyncio
import math
import time
import zlib
from collections.abc import Callable
from typing import Protocol

from litestar.types import Receive

from openjev.domain.errors import echo
from openjev.http.errors import BadBody, BadEncoding, BodyTimeout, BodyTooLarge

try:  # Python 3.14 has it in the standard library; before that, the backport.
    from compression.zstd import ZstdDecompressor, ZstdError  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # pragma: no cover - depends on the Python version
    from backports.zstd import ZstdDecompressor, ZstdError

SUPPORTED_ENCODINGS = ("identity", "gzip", "zstd")
MAX_MEMBERS = 64  # gzip members or zstd frames in one body (a client sends one; a flood of empty ones is an attack)
PIECE_BYTES = 16 * 1024  # compressed input fed to a decompressor at a time
RATE_GRACE_SECONDS = 5.0  # the minimum rate applies after this long


class _Decompressor(Protocol):
    @property
    def eof(self) -> bool: ...
    @property
    def unused_data(self) -> bytes: ...
    def decompress(self, data: bytes, max_length: int = ..., /) -> bytes: ...


async def read_body(
    receive: Receive,
    content_encoding: str | None,
    content_length: str | None,
    limit: int,
    *,
    within: float = math.inf,
    min_rate: int = 0,
    clock: Callable[[], float] = time.monotonic,
) -> bytes:
    encoding = (content_encoding or "identity").strip().lower()
    if encoding not in SUPPORTED_ENCODINGS:
        raise BadEncoding(
            f"Content-Encoding {echo(encoding)} is not supported; use one of {', '.join(SUPPORTED_ENCODINGS)}"
        )
    if content_length is not None and content_length.isdigit() and int(content_length) > limit:
        raise BodyTooLarge(f"the request body is {content_length} bytes; the limit is {limit}")
    received = await _receive_all(receive, limit, within, min_rate, clock)
    if encoding == "identity" or not received:
        return received
    return await asyncio.to_thread(inflate, received, encoding, limit)


async def _receive_all(receive: Receive, limit: int, within: float, min_rate: int, clock: Callable[[], float]) -> bytes:
    started = clock()
    deadline = started + within
    received = bytearray()
    while True:
        # The next bytes must come before the deadline and keep the average rate (after the grace).
        due = deadline
        if min_rate:
            due = min(due, started + RATE_GRACE_SECONDS + len(received) / min_rate)
        # `asyncio.timeout`, not `wait_for`: no task per receive (a body usually arrives in one message).
        remaining = due - clock()
        try:
            if remaining <= 0:
                raise TimeoutError
            async with asyncio.timeout(None if math.isinf(remaining) else remaining):
                message = await receive()
        except TimeoutError:
            raise BodyTimeout(
                f"the request body did not arrive in time: {len(received)} bytes in {clock() - started:.1f} s "
                f"(the whole body is due within {within:g} s, at {min_rate} bytes/s or more after "
                f"{RATE_GRACE_SECONDS:g} s)"
            ) from None
        if message["type"] == "http.disconnect":
            raise BadBody(
                "the request body ended before it was complete "
                "(malformed chunked encoding, or fewer bytes than Content-Length)"
            )
        chunk: bytes = message.get("body", b"")  # type: ignore[assignment]
        received += chunk
        if len(received) > limit:
            raise BodyTooLarge(f"the request body is larger than the limit of {limit} bytes")
        if not message.get("more_body", False):
            return bytes(received)


def inflate(data: bytes, encoding: str, limit: int) -> bytes:
    """The inflated body (gzip members or zstd frames, one after another); blocking, linear in `data`."""
    if encoding == "gzip":
        return _inflate(data, "gzip", lambda: zlib.decompressobj(wbits=16 + zlib.MAX_WBITS), zlib.error, limit)
    return _inflate(data, "zstd", ZstdDecompressor, ZstdError, limit)


def _inflate(data: bytes, name: str, new: Callable[[], _Decompressor], error: type[Exception], limit: int) -> bytes:
    out = bytearray()
    view = memoryview(data)
    position = 0
    pending = b""  # input the current decompressor has not consumed yet (at most one piece)
    inflater: _Decompressor | None = None
    members = 0
    while pending or position < len(data):
        if inflater is None:
            members += 1
            if members > MAX_MEMBERS:
                raise BadEncoding(f"the {name} body has more than {MAX_MEMBERS} members; send one")
            inflater = new()
        if not pending:
            pending = bytes(view[position : position + PIECE_BYTES])
            position += len(pending)
        try:
            out += inflater.decompress(pending, limit + 1 - len(out))
        except error as exc:
            raise BadEncoding(f"the {name} body is corrupt: {exc}") from None
        if len(out) > limit:
            raise BodyTooLarge(f"the decompressed request body is larger than the limit of {limit} bytes")
        if inflater.eof:
            pending = inflater.unused_data  # another member follows (within this piece)
            inflater = None
        else:
            pending = b""  # consumed: below the output limit, nothing is held back
    if inflater is not None:
        raise BadEncoding(f"the {name} body is truncated")
    return bytes(out)
