"""The GGUF loader: a bounded, memory-mapped, weights-only :class:`Graph`.

Every tensor becomes an initializer, a read-only view of the mapped file, in numpy order:
GGUF lists dimensions fastest first (``ne[0]``), so a weight GGUF calls ``[cols, rows]`` is
the array ``[rows, cols]`` here, ready for ``x @ W.T``. Tensors of a numpy type (F32, F16,
F64, I8..I64) keep it. Every other type (Q4_0, Q8_0, the K-quants, BF16, ...) stays
quantized: its raw blocks as ``uint8 [rows, cols / block_size * block_bytes]``, with the
type's GGML name in ``graph.metadata["gguf.quant_type.<tensor name>"]`` (see
:func:`quant_type`), as ``spawnml.gguf::QuantizedMatMul`` takes it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np
from spawnml import Limits
from spawnml.errors import ModelLoadError
from spawnml.formats import FormatLoader, ModelSource
from spawnml.ir import Graph

from .sniff import MAGIC

if TYPE_CHECKING:
    from gguf import ReaderTensor

QUANT_TYPE_KEY = "gguf.quant_type."


def quant_type(graph: Graph, name: str) -> str | None:
    """The GGML block type of initializer ``name`` when it is held quantized, else None."""
    return graph.metadata.get(QUANT_TYPE_KEY + name)


class GGUFLoader(FormatLoader):
    """GGUF v2 and v3 files, little- or big-endian."""

    name = "gguf"
    extensions = (".gguf",)
    has_graph = False

    def sniff(self, head: bytes) -> bool:
        return head.startswith(MAGIC)

    def load(self, source: ModelSource, limits: Limits) -> Graph:
        limits.check("file size", source.size, limits.max_file_bytes, source.describe())
        if source.size < len(MAGIC):
            raise ModelLoadError(f"GGUF file {source.describe()} is shorter than its magic")
        if source.path is not None:
            return _read(source.path, source, limits)
        with tempfile.TemporaryFile() as spilled:  # in-memory models are mapped like files
            spilled.write(source.data or b"")
            spilled.flush()
            return _read(spilled, source, limits)


def _read(mappable: Path | BinaryIO, source: ModelSource, limits: Limits) -> Graph:
    """The graph of the GGUF file ``mappable``; its maps stay valid once the file is closed."""
    # Imported for GGUF files only: the gguf package, which these use, loads slowly.
    from gguf import GGUFReader

    from .bounds import scan
    from .metadata import stringify

    scan(np.memmap(mappable, mode="r"), source.describe(), limits)
    try:
        # The reader hands its argument to np.memmap, which takes an open file too.
        reader = GGUFReader(mappable)  # type: ignore[arg-type]
    except (ValueError, KeyError) as error:
        raise ModelLoadError(f"GGUF file {source.describe()} is not valid: {error}") from None
    metadata = stringify(reader.fields)
    initializers = {}
    for tensor in reader.tensors:
        initializers[tensor.name] = tensor.data
        if _quantized(tensor):
            metadata[QUANT_TYPE_KEY + tensor.name] = tensor.tensor_type.name
    name = metadata.get("general.name") or (source.path.stem if source.path else "gguf")
    return Graph(initializers=initializers, name=name, metadata=metadata)


def _quantized(tensor: ReaderTensor) -> bool:
    """Whether the reader left the tensor as raw blocks rather than a typed array."""
    return tensor.data.dtype == np.uint8  # GGML has no uint8 tensor type
