"""`openjev`: serve the API, print its schema, and (registered by their modules) more."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence

import msgspec

from openjev.backends import BACKENDS
from openjev.domain.errors import StartupError
from openjev.logs import configure_logging, get_logger
from openjev.settings import Settings, env_name, load_settings

log = get_logger("openjev.cli")
APP_FACTORY = "openjev.http.app:app_factory"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="openjev", description="Self-hosted System One API server.")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the API (embedded llama.cpp by default, SGLang on GPU hosts)")
    serve.add_argument("--host", help="address to listen on (OPENJEV_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (OPENJEV_PORT, default 8000)")
    serve.add_argument("--backend", choices=["auto", *BACKENDS], help="OPENJEV_BACKEND (default auto)")
    serve.add_argument("--connect", metavar="URL", help="use an SGLang (or SGLang router) already running at URL")
    serve.add_argument("--sglang-python", metavar="PATH", help="launch SGLang with this Python (another environment)")
    serve.add_argument(
        "--adapter",
        metavar="ADAPTER",
        help="OPENJEV_ADAPTER: embedded, the folder `openjev tune` wrote; SGLang, the name of a LoRA adapter it "
        "serves (NAME=PATH when openjev launches SGLang)",
    )
    serve.set_defaults(run=_serve)

    schema = commands.add_parser("schema", help="print the OpenAPI schema (no model, no network)")
    schema.set_defaults(run=_schema)

    from openjev.smoke.cli import register as register_smoke

    register_smoke(commands)

    from openjev.quality.cli import register as register_eval

    register_eval(commands)

    from openjev.bulk.cli import register as register_run

    register_run(commands)

    from openjev.tuning.cli import register as register_tune

    register_tune(commands)

    from openjev.tuning.generate_cli import register as register_generate

    register_generate(commands)

    args = parser.parse_args(argv)
    try:
        code: int = args.run(args)
    except StartupError as exc:
        print(f"openjev: {exc}", file=sys.stderr)
        return 2
    return code


def _serve(args: argparse.Namespace) -> int:
    overrides = {
        "host": args.host,
        "port": args.port,
        "backend": args.backend,
        "sglang_url": args.connect,
        "sglang_python": args.sglang_python,
        "adapter": args.adapter,
    }
    settings = load_settings(**overrides)
    configure_logging(settings.log_level)
    from openjev.listen import listen_address

    # Checked before anything starts (SGLang takes minutes): a taken port or an unusable host stops here.
    settings = msgspec.structs.replace(settings, host=listen_address(settings))
    from openjev.bootstrap import build_runtime

    runtime = build_runtime(settings)
    log.info(
        "openjev_starting",
        backend=runtime.kind,
        model=runtime.public_model,
        listen=f"http://{settings.host}:{settings.port}",
        sglang_url=settings.sglang.sglang_url,
    )
    # The Granian worker reads its settings from the environment: hand the flags down that way.
    worker_env = {env_name(k): _env_value(v) for k, v in overrides.items() if v is not None}
    if runtime.kind == "sglang" and settings.sglang.sglang_url is None:
        from openjev.adapters.sglang.launcher import run_with_sglang

        return run_with_sglang(settings, lambda extra: serve_api(settings, {**worker_env, **extra}))
    return serve_api(settings, worker_env)


def serve_api(settings: Settings, env: Mapping[str, str]) -> int:
    """Run the HTTP API under Granian (ASGI, uvloop, one worker) until it stops."""
    from granian import Granian
    from granian.constants import Interfaces, Loops

    os.environ.update(env)
    Granian(
        APP_FACTORY,
        address=settings.host,
        port=settings.port,
        interface=Interfaces.ASGI,
        loop=Loops.uvloop,
        workers=1,
        factory=True,
        log_access=False,
        workers_kill_timeout=settings.shutdown_timeout,  # a worker stuck in shutdown is killed, never awaited forever
    ).serve()
    return 0


def _schema(args: argparse.Namespace) -> int:
    from openjev.http.app import create_app
    from openjev.http.openapi_docs import openapi_document

    # The environment's limits and key on the fake backend: the `model` names are the fake's, not the served model's.
    app = create_app(load_settings(backend="fake"))
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(openapi_document(app))).decode() + "\n")
    return 0


def _env_value(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


if __name__ == "__main__":
    sys.exit(main())
