"""A hostile SGLang stand-in: healthy control routes, and a /generate (or /health, /server_info) reply
that never ends, claims a huge size, stalls half-way, or carries a bad Content-Length.

Only what openjev's SGLang adapter needs to start is answered well: GET /health, /model_info,
/server_info (and 404 for the rest, 200 for /abort_request). The route named by `HostileConfig.route`
answers in `mode` instead:

- `huge-length`: `Content-Length: 10^12`, then 64 KiB blocks for as long as the client reads;
- `endless-chunked`: `Transfer-Encoding: chunked`, 64 KiB chunks, never the last one;
- `unframed`: no length and no chunks (framed by the close), 64 KiB blocks that never stop;
- `non-ascii-length`: `Content-Length: ²` (a digit to `str.isdigit`, not to `int`);
- `stall`: `Content-Length: 100`, ten bytes, then silence.

Writes wait for the client (`drain`), so the stand-in itself holds little. It binds loopback only.
Use it in-process (`hostile_backend()`), or as a subprocess, which prints its URL once listening:

    python tests/sglang/hostile_backend.py --mode endless-chunked [--route /generate] [--port 0]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

MODES = ("huge-length", "endless-chunked", "unframed", "non-ascii-length", "stall")
BLOCK = b"x" * (64 * 1024)


@dataclass
class HostileConfig:
    mode: str = "endless-chunked"
    route: str = "/generate"
    sent: dict[str, int] = field(default_factory=dict)  # bytes written per route (all requests)
    requests: list[str] = field(default_factory=list)  # "METHOD path" of every request


def _json(status: int, body: object) -> bytes:
    raw = json.dumps(body).encode()
    reason = {200: "OK", 404: "Not Found"}[status]
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(raw)}\r\n\r\n".encode()
        + raw
    )


ROUTES = {
    "/health": _json(200, {}),
    "/model_info": _json(200, {"model_path": "hostile/model"}),
    "/server_info": _json(200, {"max_req_input_len": 32768, "kv_cache_dtype": "bf16"}),
    "/abort_request": _json(200, {}),
}


class HostileBackend:
    def __init__(self, config: HostileConfig) -> None:
        self.config = config

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                await reader.readexactly(length)
                self.config.requests.append(f"{method} {path}")
                if path == self.config.route:
                    await self._hostile(writer, path)
                    return
                writer.write(ROUTES.get(path, _json(404, {"detail": "Not Found"})))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            pass  # stopped: end quietly
        finally:
            writer.close()

    async def _hostile(self, writer: asyncio.StreamWriter, path: str) -> None:
        mode = self.config.mode

        async def send(data: bytes) -> None:
            writer.write(data)
            self.config.sent[path] = self.config.sent.get(path, 0) + len(data)
            await writer.drain()

        framing = {"huge-length": b"Content-Length: 1000000000000", "unframed": b"Connection: close",
                   "endless-chunked": b"Transfer-Encoding: chunked"}  # fmt: skip
        if mode in framing:
            await send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + framing[mode] + b"\r\n\r\n")
            block = b"%x\r\n%s\r\n" % (len(BLOCK), BLOCK) if mode == "endless-chunked" else BLOCK
            while True:
                await send(block)
        elif mode == "non-ascii-length":
            await send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \xb2\r\n\r\n{}")
            await asyncio.sleep(3600)
        elif mode == "stall":
            await send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n0123456789")
            await asyncio.sleep(3600)
        else:
            raise ValueError(f"unknown mode {mode!r}")


@contextlib.asynccontextmanager
async def hostile_backend(mode: str, route: str = "/generate") -> AsyncIterator[tuple[str, HostileConfig]]:
    """(base URL, config) of a hostile stand-in served in this event loop."""
    config = HostileConfig(mode=mode, route=route)
    backend = HostileBackend(config)
    tasks: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            await backend.handle(reader, writer)
        finally:
            tasks.discard(task)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", config
    finally:
        server.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _serve(mode: str, route: str, port: int) -> None:
    backend = HostileBackend(HostileConfig(mode=mode, route=route))
    server = await asyncio.start_server(backend.handle, "127.0.0.1", port)
    print(f"hostile-backend listening on http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=MODES, required=True)
    parser.add_argument("--route", default="/generate")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.mode, args.route, args.port))


if __name__ == "__main__":
    main()
