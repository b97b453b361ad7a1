"""One `openjev tune` run: check everything, render the items, train, write the folder (or nothing).

Every check that can fail on the input runs before anything is written or loaded: the files, the
output folder, the model, each item as the server would take it, and the memory the run needs.
While it runs, the folder holds only `.partial/` (the run's settings, the states read below the adapted
layers as they are read, and the checkpoint); the adapter, its report and, last, its manifest appear
when training ends, and `.partial/` goes. A run that fails before it has kept anything leaves no folder
behind.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import torch

import openjev
from openjev.adapters.embedded.build import choose_engine
from openjev.adapters.embedded.built import sha256_of
from openjev.adapters.embedded.gguf_codec import GGUFCodec
from openjev.adapters.embedded.llama_engine import available_cpus
from openjev.adapters.embedded.merged import engine_file
from openjev.adapters.embedded.model import resolve_model_path
from openjev.adapters.embedded.tuned import ADAPTER, MANIFEST, REPORT, Figures, Manifest, TrainingRecord
from openjev.bootstrap import build_runtime, limits_from, verified_labels
from openjev.domain.errors import StartupError
from openjev.evaluation_plan import EvaluatorConfig
from openjev.quality.cli import INTERRUPTED_EXIT_CODE
from openjev.quality.dataset import DatasetError
from openjev.settings import Settings
from openjev.tuning.adapter_file import write_adapter
from openjev.tuning.atomic_file import write_atomically
from openjev.tuning.decoder import Decoder, Shape, load_decoder, parameter_count, read_shape
from openjev.tuning.examples import TrainingItem, held_out_slice, read_labelled, render
from openjev.tuning.frozen import HeadReader, cached_tokens, freeze, shared_head
from openjev.tuning.kept_states import FOLDER as STATES
from openjev.tuning.kept_states import KeptStates, ReaderKey
from openjev.tuning.lower import LowerLayers, OpenVINOLayers, TorchLayers
from openjev.tuning.memory import check_memory
from openjev.tuning.trainer import CHECKPOINT, Evaluated, Plan, Trainer, evaluate

PARTIAL = ".partial"
RUN = "run.json"
DISK_SPARE = 256 * 2**20  # bytes beside the kept states: the checkpoint and the adapter
DEFAULT_EPOCHS = 3.0
FILL_EPOCHS = 10.0  # the most passes a deadline alone plans; the best evaluated factors are kept anyway


class Options(msgspec.Struct, frozen=True, kw_only=True):
    """The command's arguments, as a resumed run must find them again."""

    train: str
    eval: str | None
    eval_share: float
    steps: int | None
    batch: int
    epochs: float | None  # None: `DEFAULT_EPOCHS`, or with a deadline as many as fit up to `FILL_EPOCHS`
    rank: int
    layers: int | None
    learning_rate: float
    seed: int
    dtype: str
    name: str


class RunRecord(msgspec.Struct, frozen=True):
    """`.partial/run.json`: what a `--resume` must match, and the figures measured before training (None
    while the items are being read)."""

    options: Options
    base_sha256: str
    data_sha256: str
    steps: int
    before: Figures | None = None
    eval_seconds: float = 0.0


@dataclass(frozen=True)
class Inputs:
    base_model: str
    base_file: Path
    base_sha256: str
    data_sha256: str
    train: list[TrainingItem]
    evals: list[TrainingItem]
    eval_source: str


def prepare(options: Options, settings: Settings, report: Callable[[str], None]) -> Inputs:
    """The served model file and both sets as the server would prompt them; DatasetError/StartupError if not."""
    labelled = read_labelled(Path(options.train))
    if options.eval is not None:
        train_items, eval_items = list(labelled.items), list(read_labelled(Path(options.eval)).items)
        eval_source = options.eval
    else:
        train_items, eval_items = held_out_slice(labelled.items, options.eval_share, options.seed)
        eval_source = f"{options.eval_share:.0%} of {options.train} held out (seeded shuffle, seed {options.seed})"
    # The model as it is served without an adapter: OPENJEV_ADAPTER, if set, is not trained upon.
    settings = msgspec.structs.replace(settings, adapter=None)
    runtime = build_runtime(settings)
    if runtime.kind != "embedded":
        raise StartupError("openjev tune trains the embedded backend's models: unset OPENJEV_BACKEND")
    cache = settings.embedded.resolved_cache_dir()
    path, packaged = resolve_model_path(settings.model, cache, revision=settings.revision)
    report(f"model: {runtime.public_model}")
    base_file, known_sha = engine_file(packaged, path, cache, workers=os.cpu_count() or 1)
    codec = GGUFCodec.from_gguf(base_file)
    labels = verified_labels(codec, settings)
    config = EvaluatorConfig(
        limits=limits_from(settings),
        debias=settings.resolved_debias(runtime.default_debias),
        max_orders=settings.debias_max_orders,
        branch_context=settings.embedded.slot_context,
        date_facts=settings.date_facts,
    )
    train = render(train_items, codec, labels, config, source=options.train)
    evals = render(eval_items, codec, labels, config, source=options.eval or options.train)
    return Inputs(
        base_model=settings.model or (packaged.name if packaged else str(path)),
        base_file=base_file,
        base_sha256=known_sha or sha256_of(base_file),
        data_sha256=labelled.sha256,
        train=train,
        evals=evals,
        eval_source=eval_source,
    )


def check_out(out: Path, *, resume: bool) -> None:
    """Refuse an output folder that would be overwritten, or a resume with nothing to resume."""
    partial = out / PARTIAL
    if resume:
        if not (partial / RUN).is_file():
            raise DatasetError(f"--resume: {out} holds no interrupted run (no {PARTIAL}/{RUN})")
        return
    if (out / MANIFEST).exists():
        raise DatasetError(f"--out {out} already holds a trained adapter: name another folder")
    if partial.exists():
        raise DatasetError(f"--out {out} holds an interrupted run: continue it with --resume, or delete the folder")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise DatasetError(f"--out {out} exists and is not an empty folder: name a new folder")
    if not out.parent.is_dir():
        raise DatasetError(f"--out {out}: the folder {out.parent} does not exist")


def train(
    options: Options,
    settings: Settings,
    out: Path,
    *,
    resume: bool,
    deadline: float | None,
    max_memory_gb: float | None,
    report: Callable[[str], None],
) -> int:
    """The whole run, done by `deadline` (a `time.monotonic()`) when there is one; returns the exit code
    (0, or 130 when interrupted with the checkpoint kept)."""
    check_out(out, resume=resume)
    inputs = prepare(options, settings, report)
    shape = read_shape(inputs.base_file)
    layers = options.layers or default_layers(shape, parameter_count(inputs.base_file))
    dtype = resolved_dtype(options.dtype)
    longest = max(inputs.train + inputs.evals, key=lambda item: item.longest)
    head = shared_head(inputs.train, inputs.evals)
    cached = len(head) + cached_tokens(inputs.train, head) + cached_tokens(inputs.evals, head)
    lower_bytes = None
    model_xml = openvino_model(settings, inputs, shape, layers, report)
    if model_xml is not None:
        lower_bytes = model_xml.with_suffix(".bin").stat().st_size
    check_memory(
        inputs.base_file, shape, layers, options.rank, dtype, longest, cached, max_memory_gb,
        batch=options.batch, lower_bytes=lower_bytes,
    )  # fmt: skip
    steps = planned_steps(options, len(inputs.train), filling=deadline is not None)
    partial = out / PARTIAL
    record = read_record(partial, options, inputs) if resume else None
    if record is None:
        check_disk(out, cached * shape.width * dtype.itemsize)
    created = not out.exists()
    partial.mkdir(parents=True, exist_ok=True)
    if record is None:
        record = RunRecord(options, inputs.base_sha256, inputs.data_sha256, steps)
        write_atomically(partial / RUN, msgspec.json.encode(record))
    store = KeptStates(partial / STATES, reader_key(model_xml, shape, layers, dtype, inputs, settings))
    try:
        report(f"training on {len(inputs.train)} items, measuring on {len(inputs.evals)} ({inputs.eval_source})")
        if store.discarded:
            report(f"the states kept in {partial} were read otherwise (another engine or setting): reading again")
        decoder = load_decoder(
            inputs.base_file, rank=options.rank, layers=layers, dtype=dtype, seed=options.seed, lower=model_xml is None
        )
        reader = HeadReader(lower_layers(decoder, model_xml, settings), head, shape.width, dtype)
        train_set = freeze(inputs.train, reader, "the training items", report, store, "train")
        eval_set = freeze(inputs.evals, reader, "the measuring items", report, store, "eval")
        plan = Plan(
            steps=steps,
            batch=options.batch,
            learning_rate=options.learning_rate,
            seed=options.seed,
            evaluations=3,
            deadline=deadline,
        )
        if record.before is None:
            before = evaluate(decoder, eval_set)
            report(f"before: {describe(before.figures)} ({before.seconds:.0f} s)")
            trainer = Trainer(decoder, during_training(plan, before.seconds, deadline), partial, report)
            record = msgspec.structs.replace(record, before=before.figures, eval_seconds=before.seconds)
            write_atomically(partial / RUN, msgspec.json.encode(record))
            trainer.save_checkpoint()
        else:
            trainer = Trainer(decoder, during_training(plan, record.eval_seconds, deadline), partial, report)
            trainer.resume()
            report(f"resuming at step {trainer.progress.step} of {trainer.steps}")
    except BaseException:
        if created and not (partial / CHECKPOINT).exists() and not store.any():
            shutil.rmtree(out, ignore_errors=True)  # nothing worth resuming: no folder left behind
        raise
    stopped_by = trainer.run(train_set, eval_set, record.eval_seconds)
    trainer.save_checkpoint()  # a Ctrl-C from here on loses nothing either
    if stopped_by == "interrupted":
        report(f"interrupted at step {trainer.progress.step}: continue with `openjev tune … --out {out} --resume`")
        return INTERRUPTED_EXIT_CODE
    trainer.consider(evaluate(decoder, eval_set))
    final = trainer.best()
    report(
        f"after:  {describe(final.figures)} (the factors of step {trainer.progress.best_step} of "
        f"{trainer.progress.step}; stopped by {stopped_by})"
    )
    finish(out, options, inputs, record, trainer, final, stopped_by, shape.architecture, layers, dtype_name(dtype))
    return 0


def openvino_model(
    settings: Settings, inputs: Inputs, shape: Shape, layers: int, report: Callable[[str], None]
) -> Path | None:
    """The OpenVINO model of the base, when OpenVINO serves it and layers stay unchanged below the adapted
    ones (built now if the server has not built it yet); else None, and PyTorch reads those layers."""
    if layers >= shape.layers or choose_engine(settings.embedded.engine, shape.architecture) != "openvino":
        return None
    from openjev.adapters.openvino.convert import ensure_model

    report("the unchanged layers are read by OpenVINO, the engine that serves the model")
    cache = settings.embedded.resolved_cache_dir()
    return ensure_model(inputs.base_file, inputs.base_sha256, cache, workers=engine_threads(settings))


def reader_key(
    model_xml: Path | None, shape: Shape, layers: int, dtype: torch.dtype, inputs: Inputs, settings: Settings
) -> ReaderKey:
    """What the states below the adapted layers are read with: kept states read otherwise are read again."""
    return ReaderKey(
        engine="torch" if model_xml is None else "openvino",
        first_adapted=shape.layers - layers,
        dtype=dtype_name(dtype),
        base_sha256=inputs.base_sha256,
        int8_activations=model_xml is not None and settings.embedded.int8_activations,
    )


def check_disk(out: Path, needed: int) -> None:
    """Refuse a run whose read states (kept in `.partial/` while it lasts) would not fit on `out`'s disk."""
    free = shutil.disk_usage(out if out.is_dir() else out.parent).free
    if needed + DISK_SPARE > free:
        raise DatasetError(
            f"--out {out}: the run keeps about {(needed + DISK_SPARE) / 2**30:.1f} GiB there while it lasts (the "
            f"items' states below the adapted layers) and the disk has {free / 2**30:.1f} GiB free: free some "
            "space, put --out on another disk, or train on fewer or shorter items"
        )


def lower_layers(decoder: Decoder, model_xml: Path | None, settings: Settings) -> LowerLayers[Any]:
    if model_xml is None:
        return TorchLayers(decoder)
    return OpenVINOLayers(
        model_xml,
        decoder.first_adapted,
        threads=engine_threads(settings),
        int8_activations=settings.embedded.int8_activations,
        dtype=decoder.dtype,
    )


def engine_threads(settings: Settings) -> int:
    """The threads the server's engine would use (`OPENJEV_THREADS`, else every CPU this process may run on)."""
    return settings.embedded.threads or available_cpus()


LARGE_MODEL = 1_000_000_000  # parameters
LARGE_MODEL_LAYERS = 4


def default_layers(shape: Shape, parameters: int) -> int:
    """`--layers` when not given: every layer of a small model, the top 4 of one with a billion weights or more.

    Measured on a 2-core CPU (docs/tuning.md): the default 1.5B model adapted whole made 44 steps of one
    item in 30 minutes; its top 4 layers, 100 steps of 4 items after reading the rest once. A 135M model
    adapted whole learns a rule in a minute and a half.
    """
    return min(shape.layers, LARGE_MODEL_LAYERS) if parameters >= LARGE_MODEL else shape.layers


def planned_steps(options: Options, items: int, *, filling: bool) -> int:
    """`--steps`, else `--epochs` passes; with neither, three passes, or with `--max-minutes` up to
    `FILL_EPOCHS`, of which the trainer keeps as many as fit (`Trainer.fit_to`): time given to a run
    goes to training, since the factors measured best are the ones kept."""
    if options.steps is not None:
        return options.steps
    epochs = options.epochs or (FILL_EPOCHS if filling else DEFAULT_EPOCHS)
    return max(1, round(epochs * items / options.batch))


def during_training(plan: Plan, eval_seconds: float, deadline: float | None) -> Plan:
    """Up to three evaluations while training, to keep the best factors; with a deadline, only as many as
    take a fifth of the time left at most (an evaluation of many items on a large model takes minutes)."""
    if deadline is None:
        return plan
    left = deadline - time.monotonic()
    affordable = int(0.2 * left / eval_seconds) if eval_seconds > 0 else plan.evaluations
    return dataclasses.replace(plan, evaluations=max(0, min(plan.evaluations, affordable)))


def finish(
    out: Path,
    options: Options,
    inputs: Inputs,
    record: RunRecord,
    trainer: Trainer,
    after: Evaluated,
    stopped_by: str,
    architecture: str,
    layers: int,
    dtype: str,
) -> None:
    """Write the adapter, the report and the manifest (last: its presence means the folder is whole)."""
    factors = {}
    for module in trainer.decoder.adapted():
        assert module.a is not None and module.b is not None
        factors[module.name] = (
            module.a.detach().numpy().astype(np.float32),
            module.b.detach().numpy().astype(np.float32),
        )
    assert record.before is not None  # measured before the first step
    alpha = 2.0 * options.rank
    temporary = out / f".{ADAPTER}.tmp"
    write_adapter(temporary, architecture, factors, alpha)
    os.replace(temporary, out / ADAPTER)
    report = {
        "eval_source": inputs.eval_source,
        "before": record.before,
        "after": after.figures,
        "answers_after": after.answers,
        "losses": trainer.progress.losses,
    }
    write_atomically(out / REPORT, msgspec.json.format(msgspec.json.encode(report)))
    training = TrainingRecord(
        rank=options.rank,
        alpha=alpha,
        layers=layers,
        learning_rate=options.learning_rate,
        steps=trainer.progress.step,
        steps_planned=trainer.steps,
        seed=options.seed,
        dtype=dtype,
        train_items=len(inputs.train),
        eval_items=len(inputs.evals),
        eval_source=inputs.eval_source,
        seconds=round(trainer.progress.seconds, 1),
        stopped_by=stopped_by,
    )
    manifest = Manifest(
        name=options.name,
        base_model=inputs.base_model,
        base_file=inputs.base_file.name,
        base_sha256=inputs.base_sha256,
        adapter_sha256=sha256_of(out / ADAPTER),
        data_sha256=inputs.data_sha256,
        training=training,
        before=record.before,
        after=after.figures,
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        openjev_version=openjev.__version__,
    )
    write_atomically(out / MANIFEST, msgspec.json.format(msgspec.json.encode(manifest)))
    shutil.rmtree(out / PARTIAL)


def read_record(partial: Path, options: Options, inputs: Inputs) -> RunRecord:
    record = msgspec.json.decode((partial / RUN).read_bytes(), type=RunRecord)
    if record.options != options:
        raise DatasetError("--resume: the run was started with other settings; give the same ones (or start anew)")
    if record.data_sha256 != inputs.data_sha256 or record.base_sha256 != inputs.base_sha256:
        raise DatasetError("--resume: the training file or the model changed since the run started; start anew")
    return record


def describe(figures: Figures) -> str:
    stable = (
        f", unchanged when reversed {figures.unchanged_when_reversed:.1%}"
        if figures.unchanged_when_reversed is not None
        else ""
    )
    return f"accuracy {figures.accuracy:.1%} of {figures.items}{stable}, loss {figures.loss:.3f}"


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def resolved_dtype(name: str) -> torch.dtype:
    """`auto`: bfloat16 where the CPU has bf16 instructions (AMX or AVX-512 BF16), float32 elsewhere."""
    if name == "auto":
        try:
            flags = Path("/proc/cpuinfo").read_text()
        except OSError:
            flags = ""
        return torch.bfloat16 if ("amx_bf16" in flags or "avx512_bf16" in flags) else torch.float32
    return torch.bfloat16 if name == "bfloat16" else torch.float32
