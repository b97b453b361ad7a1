"""A LoRA adapter in llama.cpp's GGUF layout, read for merging into a model's matrices.

The layout is the one llama.cpp loads (`general.type` = `adapter`, `adapter.type` = `lora`,
`adapter.lora.alpha`, and per adapted matrix `<name>.lora_a`, rank × inputs, and `<name>.lora_b`,
outputs × rank), so an adapter trained for openjev is also an ordinary llama.cpp adapter. The
update of a matrix is (alpha / rank) · B·A, as PEFT and llama.cpp both define it. `requantize`
adds it to the matrix a block of rows at a time: the merged float32 matrix never exists whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
from gguf.quants import dequantize

from openjev.adapters.embedded.gguf_file import TensorInfo, read_gguf_metadata, read_layout
from openjev.domain.errors import StartupError

_A, _B = ".lora_a", ".lora_b"


@dataclass(frozen=True)
class Factors:
    a: TensorInfo  # GGUF shape (inputs, rank)
    b: TensorInfo  # GGUF shape (rank, outputs)

    @property
    def rank(self) -> int:
        return self.a.shape[1]


@dataclass(frozen=True)
class LoraAdapter:
    path: Path
    alpha: float
    data_start: int
    matrices: dict[str, Factors]  # the adapted matrix's name in the model -> its factors

    def update(self, name: str, start: int, stop: int) -> np.ndarray:
        """Rows `start:stop` of matrix `name`'s update, in float32 (computed in float64, so the result
        does not depend on the order a BLAS library sums in)."""
        factors = self.matrices[name]
        a = self._read(factors.a).astype(np.float64)  # (rank, inputs)
        b = self._read(factors.b, rows=(start, stop)).astype(np.float64)  # (stop - start, rank)
        return ((b @ a) * (self.alpha / factors.rank)).astype(np.float32)

    def _read(self, tensor: TensorInfo, rows: tuple[int, int] | None = None) -> np.ndarray:
        count = tensor.shape[1]
        data = np.memmap(self.path, np.uint8, "r", offset=self.data_start + tensor.offset, shape=(tensor.nbytes,))
        packed = data.reshape(count, -1)
        if rows is not None:
            packed = packed[rows[0] : rows[1]]
        return dequantize(np.asarray(packed), tensor.kind).reshape(packed.shape[0], tensor.shape[0])


def read_adapter(path: Path) -> LoraAdapter:
    """The adapter's alpha and factor tensors; StartupError saying what is wrong with a file that is not one."""
    metadata = read_gguf_metadata(path, arrays=False)
    if metadata.get(gguf.Keys.General.TYPE) != gguf.GGUFType.ADAPTER or metadata.get(gguf.Keys.Adapter.TYPE) != "lora":
        raise StartupError(f"{path} is not a LoRA adapter GGUF (general.type adapter, adapter.type lora)")
    alpha = metadata.get(gguf.Keys.Adapter.LORA_ALPHA)
    if not isinstance(alpha, int | float) or alpha <= 0:
        raise StartupError(f"{path} has no positive adapter.lora.alpha")
    layout = read_layout(path)
    tensors = {t.name: t for t in layout.tensors}
    matrices: dict[str, Factors] = {}
    for name, a in tensors.items():
        if not name.endswith(_A):
            continue
        matrix = name.removesuffix(_A)
        b = tensors.get(matrix + _B)
        if b is None or len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[0]:
            raise StartupError(f"{path}: the factors of {matrix} are missing or their ranks differ")
        matrices[matrix] = Factors(a, b)
    if not matrices or len(matrices) * 2 != len(tensors):
        raise StartupError(f"{path}: every tensor must be one of a {_A}/{_B} pair, and there must be one")
    return LoraAdapter(path, float(alpha), layout.data_start, matrices)


def check_fits(adapter: LoraAdapter, model: dict[str, TensorInfo]) -> None:
    """Refuse an adapter whose matrices the model lacks or shapes differently (trained for another model)."""
    for name, factors in adapter.matrices.items():
        tensor = model.get(name)
        if tensor is None or tensor.shape != (factors.a.shape[0], factors.b.shape[1]):
            found = "absent" if tensor is None else f"of shape {tensor.shape}"
            raise StartupError(
                f"the adapter {adapter.path.name} changes {name} of shape {(factors.a.shape[0], factors.b.shape[1])}, "
                f"which the model has {found}: it was trained for another model"
            )
