"""`openjev tune` end to end on the packaged SmolLM2-135M: it learns, the adapter serves, a run resumes,
and bad input is refused with nothing half-written left behind."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import pytest_asyncio
from litestar import Litestar
from litestar.testing import AsyncTestClient

from openjev.adapters.embedded.merged import served_file
from openjev.adapters.embedded.model import smollm2_path
from openjev.adapters.embedded.packaged_models import SMOLLM2_135M
from openjev.adapters.embedded.tuned import Manifest, read_folder
from openjev.bootstrap import build_runtime
from openjev.domain.errors import StartupError
from openjev.http.app import create_app
from openjev.settings import load_settings
from tests.tuning.labelled import team_items, write_jsonl

pytestmark = [pytest.mark.integration, pytest.mark.needs_torch]

STEPS = 16  # of 4 items each: the 24 items twice and a half, 100 % right on the 8 held out when measured
TUNE = [sys.executable, "-m", "openjev.cli", "tune", "--model", "smollm2-135m", "--learning-rate", "3e-3"]
LOCAL = "http://127.0.0.1"


def tune(*args: str | Path | int, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENJEV_")} | {"OPENJEV_CACHE_DIR": str(cache)}
    return subprocess.run([*TUNE, *map(str, args)], capture_output=True, text=True, timeout=900, env=env)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("data")
    write_jsonl(folder / "train.jsonl", team_items(24, seed=1, yes_no=True))
    write_jsonl(folder / "eval.jsonl", team_items(8, seed=2, yes_no=True))
    return folder


@pytest.fixture(scope="module")
def trained(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "teams"
    done = tune(data / "train.jsonl", "--eval", data / "eval.jsonl", "--out", out, "--steps", STEPS, cache=data)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_training_lowers_the_loss_and_writes_a_checked_folder(trained: Path, data: Path) -> None:
    assert sorted(p.name for p in trained.iterdir()) == ["adapter.gguf", "manifest.json", "report.json"]
    manifest = read_folder(trained).manifest  # its adapter's sha256 checked against the manifest
    assert manifest.base_model == "smollm2-135m" and manifest.base_sha256 == SMOLLM2_135M.sha256
    assert manifest.data_sha256 == hashlib.sha256((data / "train.jsonl").read_bytes()).hexdigest()
    assert manifest.training.steps == STEPS and manifest.training.stopped_by == "steps"
    assert manifest.after.items == manifest.before.items == 8
    assert manifest.after.loss < manifest.before.loss
    losses = json.loads((trained / "report.json").read_text())["losses"]
    assert len(losses) == STEPS and sum(losses[-5:]) < sum(losses[:5])


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def clients(trained: Path, data: Path) -> AsyncIterator[tuple[AsyncTestClient[Litestar], ...]]:
    async def started(extra: dict[str, str]) -> AsyncTestClient[Litestar]:
        env = {"OPENJEV_LOG_LEVEL": "warning", "OPENJEV_MODEL": "smollm2-135m", "OPENJEV_CACHE_DIR": str(data)}
        client = AsyncTestClient(app=create_app(load_settings(env | extra)), timeout=120, base_url=LOCAL)
        await client.__aenter__()
        for _ in range(1200):
            if (await client.get("/health")).status_code == 200:
                return client
            await asyncio.sleep(0.1)
        raise AssertionError(f"never ready: {(await client.get('/health')).json()}")

    pair = (await started({}), await started({"OPENJEV_ADAPTER": str(trained)}))
    yield pair
    for client in pair:
        await client.__aexit__(None, None, None)


@pytest.mark.asyncio(loop_scope="module")
async def test_the_adapter_is_served_by_name_and_changes_the_answers(
    clients: tuple[AsyncTestClient[Litestar], ...],
) -> None:
    base, adapted = clients
    names = [m["name"] for m in (await adapted.get("/v1/models")).json()["models"]]
    assert "HuggingFaceTB/SmolLM2-135M-Instruct+teams" in names
    assert (await adapted.get("/health")).json()["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct+teams"
    right_before = right_after = 0.0
    for item in team_items(8, seed=2, yes_no=True):
        body: dict[str, Any] = {"model": "jev-latest", "state": item["state"], "questions": {"q": item["question"]}}
        before = (await base.post("/v1/systemone", json=body)).json()["answers"]["q"]["noul"]
        after = (await adapted.post("/v1/systemone", json=body)).json()["answers"]["q"]["noul"]
        assert after != before
        right_before += before if item["gold"] else 1 - before
        right_after += after if item["gold"] else 1 - after
    assert right_after > right_before  # the served answers moved towards the labels


def test_an_adapter_trained_on_another_model_is_refused(trained: Path, tmp_path: Path) -> None:
    settings = load_settings({"OPENJEV_ADAPTER": str(trained), "OPENJEV_CACHE_DIR": str(tmp_path)})
    with pytest.raises(StartupError, match=r"trained on smollm2-135m.*set OPENJEV_MODEL=smollm2-135m"):
        build_runtime(settings)  # the default model: refused before anything loads
    other = tmp_path / "other.gguf"
    other.write_bytes(smollm2_path().read_bytes()[:-1] + b"\x01")  # a model given by path: its sha256 decides
    with pytest.raises(StartupError, match=r"not on the model served here \(other.gguf"):
        served_file(None, other, tmp_path, read_folder(trained), workers=1)


def test_a_changed_adapter_file_is_refused(trained: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("adapter.gguf", "manifest.json"):
        (copy / name).write_bytes((trained / name).read_bytes())
    with (copy / "adapter.gguf").open("r+b") as handle:
        handle.seek(-1, os.SEEK_END)
        handle.write(b"\x07")
    with pytest.raises(StartupError, match="the file was changed or damaged"):
        read_folder(copy)


@pytest.fixture
def stopped_run(data: Path, tmp_path: Path) -> Path:
    """A run interrupted with Ctrl-C (SIGINT) after its first steps."""
    out = tmp_path / "resumable"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENJEV_")} | {"OPENJEV_CACHE_DIR": str(data)}
    args = [*TUNE, str(data / "train.jsonl"), "--eval", str(data / "eval.jsonl"), "--out", str(out), "--steps", "12"]
    process = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, env=env)
    assert process.stderr is not None
    lines = []
    deadline = time.monotonic() + 600
    for line in process.stderr:
        lines.append(line)
        if "step 4/12" in line or time.monotonic() > deadline:
            break
    process.send_signal(signal.SIGINT)
    lines += process.stderr.readlines()
    assert process.wait(timeout=300) == 130, "".join(lines)[-3000:]
    assert any("continue with" in line and "--resume" in line for line in lines)
    return out


def test_an_interrupted_run_resumes_where_it_stopped(stopped_run: Path, data: Path) -> None:
    assert not (stopped_run / "manifest.json").exists() and (stopped_run / ".partial" / "checkpoint.pt").is_file()
    done = tune(data / "train.jsonl", "--eval", data / "eval.jsonl", "--out", stopped_run, "--steps", 12,
                "--resume", cache=data)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming at step" in done.stderr and "resuming at step 0 " not in done.stderr
    assert "the training items: 24 of 24 read before" in done.stderr  # the states were kept, not read again
    assert "the measuring items: 8 of 8 read before" in done.stderr
    manifest = msgspec.json.decode((stopped_run / "manifest.json").read_bytes(), type=Manifest)
    assert manifest.training.steps == 12 and not (stopped_run / ".partial").exists()
    other = tune(data / "train.jsonl", "--out", stopped_run, "--steps", 12, "--resume", cache=data)
    assert other.returncode == 2 and "holds no interrupted run" in other.stderr


def test_a_run_stopped_while_reading_keeps_what_it_read(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C after the training items were read, before the measuring items were: `--resume` reads only those."""
    from openjev.tuning import session
    from openjev.tuning.frozen import freeze

    def stopped_at_eval(items: Any, reader: Any, what: str, report: Any, store: Any, name: str) -> Any:
        if name == "eval":
            raise KeyboardInterrupt
        return freeze(items, reader, what, report, store, name)

    options = session.Options(
        train=str(data / "train.jsonl"), eval=str(data / "eval.jsonl"), eval_share=0.2, steps=2, batch=4, epochs=None,
        rank=4, layers=None, learning_rate=3e-3, seed=0, dtype="auto", name="teams",
    )  # fmt: skip
    settings = load_settings({"OPENJEV_MODEL": "smollm2-135m", "OPENJEV_CACHE_DIR": str(data)})
    out, said = tmp_path / "out", list[str]()
    monkeypatch.setattr(session, "freeze", stopped_at_eval)
    with pytest.raises(KeyboardInterrupt):
        session.train(options, settings, out, resume=False, deadline=None, max_memory_gb=None, report=said.append)
    assert sorted(p.name for p in (out / ".partial").iterdir()) == ["run.json", "states"]
    monkeypatch.undo()
    assert (
        session.train(options, settings, out, resume=True, deadline=None, max_memory_gb=None, report=said.append) == 0
    )
    assert "the training items: 24 of 24 read before, kept in the run's folder" in said
    assert not any(line.startswith("the measuring items") for line in said)  # read: none was kept
    assert read_folder(out).manifest.training.steps == 2


@pytest.mark.parametrize(
    ("lines", "said"),
    [
        ([], "no items"),
        (['{"state": "x", "question": {"type": "noul"}, "gold": "maybe"}'], "line 1: gold 'maybe' is not one"),
        (['{"state": "x", "question": {"type": "choice", "criteria": {"a": "A"}}, "gold": "c"}'], "line 1: gold"),
    ],
)
def test_bad_data_is_refused_before_anything_is_written(lines: list[str], said: str, tmp_path: Path) -> None:
    train = tmp_path / "train.jsonl"
    train.write_text("".join(line + "\n" for line in lines))
    done = tune(train, "--out", tmp_path / "out", cache=tmp_path)
    assert done.returncode == 2 and said in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "out").exists()


def test_too_little_memory_says_what_to_lower(data: Path, tmp_path: Path) -> None:
    done = tune(data / "train.jsonl", "--out", tmp_path / "out", "--max-memory-gb", "0.05", cache=data)
    assert done.returncode == 2, done.stderr
    assert "training needs about" in done.stderr and "--layers" in done.stderr and "smaller --model" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_finished_folder_is_never_overwritten(trained: Path, data: Path) -> None:
    before = (trained / "adapter.gguf").read_bytes()
    done = tune(data / "train.jsonl", "--out", trained, cache=data)
    assert done.returncode == 2 and "already holds a trained adapter" in done.stderr
    assert (trained / "adapter.gguf").read_bytes() == before
