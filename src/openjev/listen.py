"""The address the API listens on, checked before anything starts.

Granian takes an IP address only, and shares a port another server already listens on (port
reuse), so a second `openjev serve` on the same port would start silently and take a share of
the traffic. Here the host is resolved (host names such as `localhost` work) and the port is
bound once without port reuse: a port in use or an address this machine does not have stops
start-up with a message naming the setting.
"""

from __future__ import annotations

import errno
import ipaddress
import socket

from openjev.domain.errors import SettingsError, StartupError
from openjev.settings import Settings, env_name


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on `host` now (for a server the caller is about to start: tests, benchmarks)."""
    return free_ports(1, host)[0]


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct TCP ports free on `host` now.

    Every probe stays bound until all are chosen: two separate `free_port()` calls may be handed
    the same port by the kernel, and two servers would then be told to share it.
    """
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind((host, 0))
        return [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def listen_address(settings: Settings) -> str:
    """The IP address to give Granian for `settings.host`; raises if the server could not listen there."""
    host, port = settings.host.strip(), settings.port
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise SettingsError(f"{env_name('host')}: cannot resolve {host!r}: {exc}") from None
    family, _, _, _, sockaddr = infos[0]
    address = str(sockaddr[0])
    if port == 0:
        return address
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # connections in TIME_WAIT are no obstacle
        try:
            sock.bind(sockaddr)
            sock.listen(1)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise StartupError(
                    f"address in use: port {port} on {address} is already taken by another process "
                    f"(choose another with {env_name('port')} or --port)"
                ) from None
            raise SettingsError(f"{env_name('host')}: cannot listen on {host!r} ({address}): {exc.strerror}") from None
    return address


def is_loopback(host: str) -> bool:
    """Whether `host` (as configured) names a loopback interface."""
    name = host.strip().strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
