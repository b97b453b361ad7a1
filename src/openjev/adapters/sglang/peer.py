"""What `OPENJEV_SGLANG_URL` points at, an SGLang worker or SGLang's router, and what each tells: pure.

The two answer openjev's calls differently (docs/sglang.md §3, sglang 0.5.23 and sglang-router 0.3.2
as observed):

| | worker (SGLang itself) | router (`sglang_router.launch_router`, SMG) |
|---|---|---|
| a batch `/generate` body | one JSON list back | 422 (`token_ids_logprob[0]: invalid type: sequence`) |
| `/server_info` | 200, SGLang's resolved arguments | 404 |
| `/get_server_info` | the same as `/server_info` | 200 `{"router_manager", "routers_count", "workers_count"}` |
| `/model_info` | 200 | 404 |
| `/abort_request` | 200 | 404 |
| `/health` | 200 once the model answers | 200 `OK` even with no healthy worker |
| `/health_generate` | 200 after a one-token generation | 200 while a worker is healthy, else 503 |
| `/workers` | 404 | 200 `{"workers": [{"url", "is_healthy", "model_id", ...}], "total", "stats"}` |
| `/v1/models` | its card, with `max_model_len` | its card, without `max_model_len` |

So a peer is a worker when `/server_info` (or its alias) answers SGLang's arguments, and a router
when `/get_server_info` answers the router's counts. A peer that answers neither is driven like a
router: one `/generate` body per call works with both, a batch body only with a worker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

Peer = Literal["worker", "router"]
PeerSetting = Literal["auto", "worker", "router"]

# A worker's /health answers once its model does; a router's /health answers "OK" whatever its
# workers, and its /health_generate says whether one of them is healthy (503 when none is).
HEALTH_ROUTE: dict[Peer, str] = {"worker": "/health", "router": "/health_generate"}

# The first SGLang release known (from its source and a run) to refuse an out-of-vocabulary id in
# `token_ids_logprob` with 400 "...; valid range is [0, V)." rather than failing inside the model.
RANGE_CHECKED_SINCE = (0, 5, 23)
# An id no vocabulary reaches: asked as a label, it makes SGLang say its vocabulary size.
PROBE_LABEL_ID = 2**31 - 1
_VALID_RANGE = re.compile(r"valid range is \[0, (\d+)\)")
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True)
class PeerKind:
    peer: Peer
    reason: str  # how it was found out, for the log


def is_router_info(info: Any) -> bool:
    """Whether a `/get_server_info` reply is the router's own (its counts, no SGLang arguments)."""
    return isinstance(info, dict) and ("router_manager" in info or "workers_count" in info)


def detect(server_info: Any, alias_info: Any) -> PeerKind:
    """The peer from its `/server_info` and `/get_server_info` replies (None when a route is missing)."""
    if isinstance(server_info, dict) and not is_router_info(server_info):
        return PeerKind("worker", "/server_info answers SGLang's arguments")
    if is_router_info(alias_info):
        return PeerKind("router", "/get_server_info answers the router's worker counts")
    if isinstance(alias_info, dict):
        return PeerKind("worker", "/get_server_info answers SGLang's arguments")
    return PeerKind("router", "neither /server_info nor /get_server_info answers: one call per /generate")


class ListedWorker(msgspec.Struct, frozen=True):
    """One entry of the router's `GET /workers` (of its many keys, those openjev reads)."""

    url: str
    is_healthy: bool = True


class _WorkerList(msgspec.Struct):
    workers: list[ListedWorker]


def listed_workers(reply: Any) -> list[ListedWorker] | None:
    """The workers in a router's `GET /workers` reply, each URL once; None when it is not that list."""
    try:
        workers = msgspec.convert(reply, _WorkerList).workers
    except msgspec.ValidationError:
        return None
    seen = {worker.url.rstrip("/"): worker for worker in workers if worker.url.strip()}
    return [ListedWorker(url, worker.is_healthy) for url, worker in seen.items()]


def resolve(setting: PeerSetting, server_info: Any, alias_info: Any) -> PeerKind:
    if setting != "auto":
        return PeerKind(setting, f"OPENJEV_SGLANG_PEER={setting}")
    return detect(server_info, alias_info)


def version_tuple(info: Any) -> tuple[int, int, int] | None:
    """SGLang's `version` from `/server_info`, as numbers; None when it is not there."""
    value = info.get("version") if isinstance(info, dict) else None
    match = _VERSION.match(value) if isinstance(value, str) else None
    if match is None:
        return None
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def range_checked(info: Any) -> bool:
    """Whether this SGLang refuses an out-of-vocabulary label id with 400 (so asking one is safe)."""
    version = version_tuple(info)
    return version is not None and version >= RANGE_CHECKED_SINCE


def vocab_from_refusal(message: str) -> int | None:
    """The vocabulary size in SGLang's refusal of an out-of-vocabulary label id, if it says it."""
    match = _VALID_RANGE.search(message)
    if match is None:
        return None
    size = int(match.group(1))
    return size if size > 0 else None
