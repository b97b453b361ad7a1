"""Write the pinned SGLang's command-line flags (name, whether it takes a value, its choices) as JSON.

The tests check every flag openjev launches SGLang with against this file
(tests/data/sglang-0.5.23-cli.json), so a flag or a choice the release does not know fails a test
instead of a GPU boot. It builds the release's own argparse parser from its field declarations
(`srt/arg_groups/fields/`), without installing SGLang or its GPU dependencies:

    pip download --no-deps sglang==0.5.23 -d /tmp/sglang && cd /tmp/sglang && unzip -q sglang-*.whl
    uv run python scripts/sglang-cli-fixture.py /tmp/sglang > tests/data/sglang-0.5.23-cli.json
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import pkgutil
import sys
import types
from pathlib import Path
from typing import Any


def _stub(name: str, **attributes: Any) -> None:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    sys.modules[name] = module


def _as_is(value: str) -> str:
    return value


def main() -> int:
    root = Path(sys.argv[1]).resolve()
    sys.path.insert(0, str(root))
    # The packages' __init__ modules import torch and friends: stand-ins with the real folders, and
    # stand-ins for the type parsers the declarations import (names and choices are unaffected).
    for package in ("sglang", "sglang.srt", "sglang.srt.utils", "sglang.srt.lora", "sglang.srt.model_executor"):
        _stub(package, __path__=[str(root.joinpath(*package.split(".")))])
    _stub(
        "sglang.srt.utils.common",
        human_readable_int=_as_is,
        json_list_type=_as_is,
        nullable_str=_as_is,
        LORA_TARGET_ALL_MODULES="all",
        SUPPORTED_LORA_TARGET_MODULES=["q_proj"],
    )
    _stub("sglang.srt.lora.lora_registry", LoRARef=type("LoRARef", (), {}))
    fields = importlib.import_module("sglang.srt.arg_groups.fields")
    add_arguments = importlib.import_module("sglang.srt.arg_groups.arg_utils").add_cli_args_from_dataclass
    parser = argparse.ArgumentParser()
    for info in pkgutil.iter_modules(fields.__path__):
        module = importlib.import_module(f"{fields.__name__}.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and "_NS_PATH" in cls.__dict__:
                add_arguments(parser, cls)
    flags = {
        option: {"takes_value": action.nargs != 0, "choices": list(action.choices) if action.choices else None}
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }
    json.dump(dict(sorted(flags.items())), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
