"""Properties of the HTTP/1.x reply parser: the same reply however its bytes are split, and bounded
memory and a typed failure whatever bytes arrive."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openjev.adapters.sglang.http1_parser import (
    MAX_HEAD_BYTES,
    HTTPFailure,
    MalformedResponse,
    Reply,
    ReplyTooLarge,
    ResponseParser,
)

CAP = 4096


@st.composite
def responses(draw: st.DrawFn, max_body: int = CAP) -> tuple[bytes, bytes, str]:
    """(wire bytes, body, framing) of a well-formed response of up to `max_body` bytes."""
    body = draw(st.binary(max_size=max_body))
    framing = draw(st.sampled_from(["length", "chunked", "close"]))
    status = draw(st.sampled_from([200, 400, 500, 503]))
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" if draw(st.booleans()) else b""
    name = draw(st.sampled_from(["Content-Length", "content-length", "CONTENT-LENGTH"]))
    head = f"HTTP/1.1 {status} Whatever\r\nContent-Type: application/json\r\n".encode()
    if framing == "length":
        return interim + head + f"{name}: {len(body)}\r\n\r\n".encode() + body, body, framing
    if framing == "close":
        return interim + head + b"Connection: close\r\n\r\n" + body, body, framing
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=6)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True) if b > a]
    extension = draw(st.sampled_from([b"", b";name=value"]))
    chunks = b"".join(b"%x%s\r\n%s\r\n" % (len(p), extension, p) for p in pieces)
    trailer = draw(st.sampled_from([b"", b"X-Trailer: 1\r\n"]))
    return interim + head + b"Transfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n" + trailer + b"\r\n", body, framing


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True) if b > a]


def feed_all(parser: ResponseParser, pieces: list[bytes]) -> tuple[Reply, bool] | None:
    for index, piece in enumerate(pieces):
        done = parser.feed(piece)
        if done is not None:
            assert index == len(pieces) - 1  # complete exactly when its last byte arrived
            return done
    return parser.end_of_stream()


def feed_bounded(parser: ResponseParser, pieces: list[bytes], bound: int) -> None:
    """Feed every piece, checking after each that the parser holds at most `bound` + that piece."""
    for piece in pieces:
        parser.feed(piece)
        assert parser.held <= bound + len(piece)
    parser.end_of_stream()
    raise AssertionError("a reply over the cap was taken")


@given(responses(), st.lists(st.integers(min_value=0), max_size=20))
def test_a_reply_reads_the_same_however_its_bytes_are_split(
    response: tuple[bytes, bytes, str], cuts: list[int]
) -> None:
    data, body, framing = response
    done = feed_all(ResponseParser(CAP), split(data, cuts))
    assert done is not None
    reply, reusable = done
    assert reply.body == body
    assert reusable == (framing != "close")


@given(responses(), st.lists(st.integers(min_value=0), max_size=20))
def test_a_reply_cut_short_is_never_complete(response: tuple[bytes, bytes, str], cuts: list[int]) -> None:
    data, _, framing = response
    if framing == "close":
        return  # a close is its end
    parser = ResponseParser(CAP)
    for piece in split(data[:-1], cuts):
        assert parser.feed(piece) is None
    assert parser.end_of_stream() is None


@given(
    st.sampled_from(["length", "chunked", "close"]),
    st.integers(CAP + 1, 4 * CAP),
    st.lists(st.integers(min_value=0), max_size=30),
)
def test_a_body_over_the_cap_fails_and_what_is_held_stays_bounded(framing: str, size: int, cuts: list[int]) -> None:
    body = b"b" * size
    head = b"HTTP/1.1 200 OK\r\n"
    if framing == "length":
        data = head + b"Content-Length: %d\r\n\r\n" % size + body
    elif framing == "chunked":
        pieces = [body[i : i + 256] for i in range(0, size, 256)]
        data = head + b"Transfer-Encoding: chunked\r\n\r\n" + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces)
    else:
        data = head + b"\r\n" + body
    parser = ResponseParser(CAP)
    with pytest.raises(ReplyTooLarge):
        feed_bounded(parser, split(data, cuts), CAP + len(head) + 64)


def test_a_declared_length_over_the_cap_fails_at_the_head() -> None:
    with pytest.raises(ReplyTooLarge, match="1000000000000"):
        ResponseParser(CAP).feed(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\n\r\n")


@pytest.mark.parametrize("value", ["\u00b2", "\u00b9\u00b2", "\u0661", "1_000", "+5", " ", "0x10"])
def test_content_length_is_ascii_digits_only(value: str) -> None:
    with pytest.raises(MalformedResponse, match="invalid Content-Length"):
        ResponseParser(CAP).feed(f"HTTP/1.1 200 OK\r\nContent-Length: {value}\r\n\r\n".encode())


def test_heads_trailers_and_interim_responses_are_bounded() -> None:
    with pytest.raises(MalformedResponse, match="head is larger"):
        ResponseParser(CAP).feed(b"HTTP/1.1 200 OK\r\nX: " + b"a" * MAX_HEAD_BYTES + b"\r\n\r\n")
    with pytest.raises(MalformedResponse, match="interim"):
        ResponseParser(CAP).feed(b"HTTP/1.1 103 Early Hints\r\n\r\n" * 100)
    with pytest.raises(MalformedResponse, match="trailer"):
        ResponseParser(CAP).feed(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: " + b"a" * MAX_HEAD_BYTES
        )


STARTS = [b"", b"HTTP/1.1 200 OK\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: ",
          b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"]  # fmt: skip


@given(st.sampled_from(STARTS), st.lists(st.binary(max_size=300), max_size=12))
def test_any_bytes_end_in_a_reply_nothing_yet_or_a_typed_failure(start: bytes, pieces: list[bytes]) -> None:
    parser = ResponseParser(CAP)
    try:
        for piece in [start, *pieces]:
            if parser.feed(piece) is not None:
                return
            assert parser.held <= CAP + MAX_HEAD_BYTES + 300
        parser.end_of_stream()
    except HTTPFailure:
        pass
