"""A LoRA adapter SGLang serves by name (OPENJEV_ADAPTER): the setting read, and SGLang's list checked.

SGLang 0.5.23 serves LoRA adapters in PEFT's format beside its model (files of the release, relative
to https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/):

- it loads them at launch with `--enable-lora --lora-paths NAME=PATH` (`srt/arg_groups/lora_hook.py`:
  `NAME=PATH`, or a lone `PATH` that is then its own name), or at run time with `POST
  /load_lora_adapter {"lora_name", "lora_path"}`;
- a `/generate` body names one in `lora_path` (`srt/managers/io_struct.py`: one string applies to
  every item of a batch), and the radix cache is kept per adapter (`srt/managers/schedule_batch.py`
  appends the adapter's id to the request's `extra_key`): openjev sends it on every call, warm-ups
  and the start-up probes included, so a warm-up warms the prefix its branches will use;
- `GET /v1/models` lists each loaded adapter after the model's own card, as `{"id": NAME, "root":
  PATH, "parent": <served model>, "max_model_len": null}` (`srt/entrypoints/http_server.py`
  `available_models`): the list start-up reads (`/server_info` shows only the launch's `lora_paths`);
- a name it does not serve is refused with 400 (`srt/managers/tokenizer_manager.py`
  `_validate_and_resolve_lora`, the `REFUSALS` below).

SGLang's router 0.3.2 passes a string `lora_path` on to the workers (tests/sglang/test_router.py),
but its own `/v1/models` lists no adapter: behind it, each worker it lists is asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openjev.adapters.sglang.control import ControlClient
from openjev.adapters.sglang.peer import Peer, listed_workers
from openjev.domain.errors import OpenJevError, SettingsError, StartupError
from openjev.logs import get_logger

log = get_logger("openjev.sglang")

# What `openjev tune` writes (`adapters/embedded/tuned.py`, not imported: that package needs the
# embedded engine): a GGUF adapter for an embedded model, which SGLang cannot load.
TUNE_ADAPTER = "adapter.gguf"
TUNE_MANIFEST = "manifest.json"
PEFT_CONFIG = "adapter_config.json"  # the file every PEFT LoRA adapter has
# SGLang 0.5.23's two 400 messages for a `lora_path` it does not serve (`_validate_and_resolve_lora`).
REFUSALS = ("Got LoRA adapter that has never been loaded", "was requested, but LoRA is not enabled")
_DOCS = "(docs/sglang.md#serving-an-adapter)"


@dataclass(frozen=True)
class SGLangAdapter:
    """OPENJEV_ADAPTER on SGLang: the adapter's name, and where a launched SGLang loads it from."""

    name: str
    path: str | None = None  # `NAME=PATH`: passed to the SGLang openjev launches; None: SGLang serves it already


def adapter_setting(value: str, *, launching: bool) -> SGLangAdapter:
    """OPENJEV_ADAPTER read for SGLang; SettingsError saying what to do when it cannot serve there.

    Connected (`launching` False) it is the name of an adapter SGLang serves. openjev launching
    SGLang, it is `NAME=PATH`, and openjev passes `--enable-lora --lora-paths NAME=PATH`.
    """
    text = value.strip()
    _refuse_embedded_adapter(value, Path(text).expanduser())
    name, has_path, path = (part.strip() for part in text.partition("="))
    if not name or any(character.isspace() for character in name):
        raise SettingsError(f"OPENJEV_ADAPTER={value!r}: expected the name of an adapter SGLang serves {_DOCS}")
    if not has_path:
        if launching:
            raise SettingsError(
                f"OPENJEV_ADAPTER={name}: the SGLang openjev launches serves no adapter unless told where it is: "
                f"set OPENJEV_ADAPTER={name}=PATH (a LoRA adapter in PEFT's format for OPENJEV_MODEL: a folder, or a "
                f"Hugging Face repository) and openjev passes --enable-lora --lora-paths {name}=PATH; or start SGLang "
                f"yourself with those flags and connect to it (--connect URL) {_DOCS}"
            )
        return SGLangAdapter(name)
    if not path:
        raise SettingsError(f"OPENJEV_ADAPTER={value!r}: NAME=PATH needs a PATH {_DOCS}")
    if not launching:
        raise SettingsError(
            f"OPENJEV_ADAPTER={value}: NAME=PATH tells the SGLang openjev launches where the adapter is; an SGLang "
            f"openjev connects to loads its own: start it with --enable-lora --lora-paths {name}={path} and set "
            f"OPENJEV_ADAPTER={name} {_DOCS}"
        )
    local = Path(path).expanduser()
    _refuse_embedded_adapter(value, local)
    if local.is_dir():
        if not (local / PEFT_CONFIG).is_file():
            raise SettingsError(
                f"OPENJEV_ADAPTER={value}: {local} has no {PEFT_CONFIG}; SGLang loads LoRA adapters in PEFT's format "
                f"(a folder with {PEFT_CONFIG} and adapter_model.safetensors) {_DOCS}"
            )
        return SGLangAdapter(name, str(local.resolve()))  # SGLang reads it from wherever it runs
    return SGLangAdapter(name, path)  # not here: a Hugging Face repository, or a path only SGLang's host has


def _refuse_embedded_adapter(value: str, path: Path) -> None:
    """SettingsError for a GGUF adapter (a folder `openjev tune` wrote, or a .gguf file): the embedded engine's."""
    tune_folder = path.is_dir() and (
        (path / TUNE_ADAPTER).is_file() or ((path / TUNE_MANIFEST).is_file() and not (path / PEFT_CONFIG).is_file())
    )
    if tune_folder or (path.suffix.lower() == ".gguf" and path.is_file()):
        raise SettingsError(
            f"OPENJEV_ADAPTER={value} is a GGUF adapter, such as `openjev tune` writes: it is for the embedded "
            "engine (serve it with OPENJEV_BACKEND=embedded), and SGLang cannot load it. SGLang serves a LoRA adapter "
            f"in PEFT's format ({PEFT_CONFIG} and adapter_model.safetensors) trained for the model it serves: set "
            "OPENJEV_ADAPTER=NAME=PATH when openjev launches SGLang, or start SGLang with --enable-lora --lora-paths "
            f"NAME=PATH and set OPENJEV_ADAPTER=NAME {_DOCS}"
        )


def listed_adapters(models: Any) -> dict[str, str | None] | None:
    """The adapters in a `GET /v1/models` reply, name -> path (the cards with a `parent`); None: not such a reply."""
    cards = models.get("data") if isinstance(models, dict) else None
    if not isinstance(cards, list):
        return None
    found: dict[str, str | None] = {}
    for card in cards:
        if isinstance(card, dict) and card.get("parent") is not None and isinstance(card.get("id"), str):
            root = card.get("root")
            found[card["id"]] = root if isinstance(root, str) else None
    return found


def refused(message: str) -> bool:
    """Whether an SGLang error says the `lora_path` sent is an adapter it does not serve."""
    return any(words in message for words in REFUSALS)


def not_served(name: str, url: str, listed: Sequence[str] | None = None, said: str | None = None) -> str:
    """What to do when SGLang at `url` does not serve adapter `name` (it listed `listed`, or said `said`)."""
    if said is not None:
        why = f"it answered: {said}"
    elif listed:
        why = f"it lists {', '.join(sorted(listed))}"
    else:
        why = "it lists none: LoRA is off, or no adapter is loaded"
    return (
        f"OPENJEV_ADAPTER={name}: SGLang at {url} serves no LoRA adapter of that name ({why}). Start SGLang with "
        f"--enable-lora --lora-paths {name}=PATH (an adapter in PEFT's format, trained for the model SGLang serves), "
        f"or load it into the running SGLang with POST /load_lora_adapter "
        f'{{"lora_name": "{name}", "lora_path": PATH}}; '
        f"or unset OPENJEV_ADAPTER to serve the model without it {_DOCS}"
    )


async def check_served(control: ControlClient, name: str, peer: Peer) -> None:
    """StartupError when SGLang (a worker, or any healthy worker behind the router) does not list adapter `name`.

    A peer whose list cannot be read is logged and left to the start-up label check, which sends
    `lora_path` too: SGLang's 400 for an adapter it does not serve stops start-up there.
    """
    if peer == "worker":
        urls = [control.url]
    else:
        workers = listed_workers(await control.get_json("/workers")) or []
        urls = [worker.url for worker in workers if worker.is_healthy]
    for url in urls:
        try:
            listed = listed_adapters(await control.get_json("/v1/models", base=url))
        except OpenJevError as exc:
            listed, problem = None, exc.message
        else:
            problem = "its GET /v1/models answered no model list"
        if listed is None:
            log.warning("sglang_adapter_unchecked", url=url, adapter=name, detail=problem)
        elif name not in listed:
            raise StartupError(not_served(name, url, list(listed)))
        else:
            log.info("sglang_adapter", url=url, adapter=name, path=listed[name])
    if not urls:
        log.warning(
            "sglang_adapter_unchecked", url=control.url, adapter=name, detail="the router lists no healthy worker"
        )
