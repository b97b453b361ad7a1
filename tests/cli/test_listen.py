"""Start-up refuses an address it cannot listen on, naming the setting, before anything starts."""

from __future__ import annotations

import socket

import pytest

from openjev.cli import main
from openjev.domain.errors import SettingsError, StartupError
from openjev.listen import free_ports, is_loopback, listen_address
from openjev.settings import load_settings


def test_ports_chosen_together_are_distinct() -> None:
    ports = free_ports(50)  # chosen one by one and released, the kernel may hand out one twice
    assert len(set(ports)) == 50


def test_host_names_are_resolved() -> None:
    assert listen_address(load_settings({}, host="localhost", port=0)) in ("127.0.0.1", "::1")


@pytest.mark.parametrize("host", ["no-such-host.invalid", "203.0.113.7", "999.1.1.1"])
def test_an_address_this_machine_cannot_bind_names_the_variable(host: str) -> None:
    with pytest.raises(SettingsError, match="OPENJEV_HOST"):
        listen_address(load_settings({}, host=host, port=0 if host != "203.0.113.7" else 8765))


def test_a_port_in_use_stops_start_up_naming_the_port(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)  # as Granian listens
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(StartupError, match=f"address in use: port {port}"):
            listen_address(load_settings({}, port=port))
        assert main(["serve", "--backend", "fake", "--port", str(port)]) == 2
    assert f"address in use: port {port}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("localhost", True), ("::1", True), ("[::1]", True), ("0.0.0.0", False), ("10.0.0.2", False)],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
