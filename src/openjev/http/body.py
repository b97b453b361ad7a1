"""Read a request body with the size limit applied to the bytes received AND to the inflated bytes.

A small zstd or gzip bomb is refused as soon as its output passes the limit, never inflated in full.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator

from openjev.http.errors import BadEncoding, BodyTooLarge

try:  # Python 3.14 has it in the standard library; before that, the backport.
    from compression.zstd import ZstdDecompressor, ZstdError  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # pragma: no cover - depends on the Python version
    from backports.zstd import ZstdDecompressor, ZstdError

SUPPORTED_ENCODINGS = ("identity", "gzip", "zstd")


async def read_body(
    chunks: AsyncIterator[bytes], content_encoding: str | None, content_length: str | None, limit: int
) -> bytes:
    encoding = (content_encoding or "identity").strip().lower()
    if encoding not in SUPPORTED_ENCODINGS:
        raise BadEncoding(
            f"Content-Encoding {encoding!r} is not supported; use one of {', '.join(SUPPORTED_ENCODINGS)}"
        )
    if content_length is not None and content_length.isdigit() and int(content_length) > limit:
        raise BodyTooLarge(f"the request body is {content_length} bytes; the limit is {limit}")
    received = bytearray()
    async for chunk in chunks:
        received += chunk
        if len(received) > limit:
            raise BodyTooLarge(f"the request body is larger than the limit of {limit} bytes")
    if encoding == "gzip":
        return _gunzip(bytes(received), limit)
    if encoding == "zstd":
        return _unzstd(bytes(received), limit)
    return bytes(received)


def _too_large(limit: int) -> BodyTooLarge:
    return BodyTooLarge(f"the decompressed request body is larger than the limit of {limit} bytes")


def _gunzip(data: bytes, limit: int) -> bytes:
    out = bytearray()
    while data:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            out += inflater.decompress(data, limit + 1 - len(out))
        except zlib.error as exc:
            raise BadEncoding(f"the gzip body is corrupt: {exc}") from None
        if len(out) > limit or inflater.unconsumed_tail:
            raise _too_large(limit)
        if not inflater.eof:
            raise BadEncoding("the gzip body is truncated")
        data = inflater.unused_data  # another member follows
    return bytes(out)


def _unzstd(data: bytes, limit: int) -> bytes:
    out = bytearray()
    while data:
        inflater = ZstdDecompressor()
        try:
            out += inflater.decompress(data, max_length=limit + 1 - len(out))
        except ZstdError as exc:
            raise BadEncoding(f"the zstd body is corrupt: {exc}") from None
        if len(out) > limit:
            raise _too_large(limit)
        if not inflater.eof:
            if not inflater.needs_input:
                raise _too_large(limit)
            raise BadEncoding("the zstd body is truncated")
        data = inflater.unused_data  # another frame follows
    return bytes(out)
