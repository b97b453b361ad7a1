"""`openjev generate`: items `openjev eval` reads, a function of the seed, the priority rule, and the command."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from openjev.cli import main
from openjev.quality.dataset import load_items
from openjev.tuning.generators import GENERATORS, Generator, priority


def _items(generator: Generator, count: int, seed: int, *flags: str) -> list[dict[str, object]]:
    return list(generator.generate(count, seed, {flag.name: flag.name in flags for flag in generator.flags}))


CASES = [(g.name, None) for g in GENERATORS.values()] + [(g.name, f.name) for g in GENERATORS.values() for f in g.flags]


@pytest.mark.parametrize(("name", "flag"), CASES)
def test_every_item_is_one_openjev_eval_reads_with_a_gold_among_its_options(
    name: str, flag: str | None, tmp_path: Path
) -> None:
    path = tmp_path / "items.jsonl"
    items = _items(GENERATORS[name], 80, 11, *([flag] if flag else []))
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    assert len(load_items(path)) == 80  # the reader checks each gold against the question's answers


@pytest.mark.parametrize("name", list(GENERATORS))
def test_the_seed_alone_decides_the_items(name: str) -> None:
    generator = GENERATORS[name]
    assert _items(generator, 30, 5) == _items(generator, 30, 5)
    assert _items(generator, 30, 5) != _items(generator, 30, 6)


def _parts(item: dict[str, object]) -> tuple[str, str, str, str]:
    """A ticket's name, plan, issue and mood, read back from its text."""
    found = re.fullmatch(r"From: (.+) \(plan: (\w+)\)\nSubject: support request\n\n(.+)", str(item["state"]))
    assert found
    name, plan, body = found.groups()
    issue = next(text for texts in priority.ISSUES.values() for text in texts if body.startswith(text + " "))
    return name, plan, issue, body.removeprefix(issue + " ")


def test_a_tickets_priority_is_its_base_urgency_plus_anger_plus_premium_capped_at_critical() -> None:
    assert [priority.level(0, False, False), priority.level(1, True, False), priority.level(0, True, True)] == [0, 2, 2]
    assert [priority.level(2, False, True), priority.level(2, True, True), priority.level(1, True, True)] == [3, 3, 3]
    for item in _items(GENERATORS["priority"], 100, 3):
        _, plan, issue, mood = _parts(item)
        base = next(level for level, texts in priority.ISSUES.items() if issue in texts)
        assert item["gold"] == priority.level(base, mood in priority.ANGRY, plan == "Premium")


def test_held_out_tickets_share_no_issue_mood_or_name_with_training_ones() -> None:
    train = [_parts(item) for item in _items(GENERATORS["priority"], 200, 1)]
    held_out = [_parts(item) for item in _items(GENERATORS["priority"], 200, 1, "held-out")]
    for part in (0, 2, 3):  # name, issue, mood
        assert not {ticket[part] for ticket in train} & {ticket[part] for ticket in held_out}


# What the generators wrote when they moved into the package, byte for byte as the scripts the shipped
# adapter's data came from: a change to what is drawn, or in what order, changes these.
PINNED = [
    ("decisions", "3", "8aa8c70cf4ecb350ffbe5616a43d1e6b84f1abc83776a2d2b52eaa3a08a76863"),
    ("priority", "1", "18ad660c271497a2057182939e38d6fd3397a170b6d604ae1a7b233ba398881d"),
]


@pytest.mark.parametrize(("name", "seed", "sha256"), PINNED)
def test_the_command_writes_the_pinned_bytes(
    name: str, seed: str, sha256: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t.jsonl"
    assert main(["generate", name, "40", "--seed", seed, "--out", str(out)]) == 0
    assert hashlib.sha256(out.read_bytes()).hexdigest() == sha256
    assert list(tmp_path.iterdir()) == [out]  # no temporary file left beside it
    assert capsys.readouterr().err == f"openjev generate: 40 {name} items in {out}\n"


def test_an_existing_file_is_refused_and_left_as_it_was(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "train.jsonl"
    out.write_text("mine\n")
    assert main(["generate", "priority", "5", "--out", str(out)]) == 2
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and str(out) in said[0] and "exists" in said[0]
    assert out.read_text() == "mine\n"


def test_a_file_another_process_creates_while_the_items_are_made_is_refused_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "train.jsonl"
    generator = GENERATORS["priority"]

    def racing(count: int, seed: int, options: Mapping[str, bool]) -> Iterator[dict[str, object]]:
        out.write_text("theirs\n")  # created after the command looked, before it writes
        yield from generator.generate(count, seed, options)

    monkeypatch.setitem(GENERATORS, "priority", dataclasses.replace(generator, generate=racing))
    assert main(["generate", "priority", "5", "--out", str(out)]) == 2
    assert "exists" in capsys.readouterr().err
    assert out.read_text() == "theirs\n"
    assert list(tmp_path.iterdir()) == [out]


def test_a_count_below_one_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["generate", "decisions", "0", "--out", str(tmp_path / "t.jsonl")])
    assert exited.value.code == 2
    assert "COUNT: must be at least 1" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_help_lists_every_generator_with_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["generate", "--help"])
    assert exited.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert len(GENERATORS) == 2
    for generator in GENERATORS.values():
        assert f"{generator.name} {' '.join(generator.help.split())}" in shown


def test_the_generators_import_nothing_the_tune_group_brings() -> None:
    """`uv run openjev generate` runs without PyTorch, NumPy or gguf: a fresh interpreter shows what loads."""
    code = (
        "import sys, openjev.tuning.generate_cli; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'numpy', 'gguf', 'openvino'}))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
