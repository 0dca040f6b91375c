"""TFLite tensors: element types, shapes, quantization parameters and constant data.

Constant data is decoded at load: sparse constants (``SparsityParameters``) are densified,
and quantized constants are dequantized to float32 when a float operator reads them, so
weights of quantized models become ordinary float initializers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tflite
from spawnml import Limits, ModelLoadError

from .reader import TFLiteModel, int_vector

#: TFLite TensorType -> numpy dtype (the types SpawnML reads).
DTYPES: dict[int, np.dtype] = {
    getattr(tflite.TensorType, name): np.dtype(dtype)
    for name, dtype in {
        "FLOAT32": "float32",
        "FLOAT16": "float16",
        "FLOAT64": "float64",
        "INT8": "int8",
        "UINT8": "uint8",
        "INT16": "int16",
        "UINT16": "uint16",
        "INT32": "int32",
        "UINT32": "uint32",
        "INT64": "int64",
        "BOOL": "bool",
    }.items()
}
TYPE_NAMES = {code: name for name, code in vars(tflite.TensorType).items() if not name.startswith("_")}


@dataclass(frozen=True)
class Quantization:
    """Affine quantization: ``real = scale * (q - zero_point)``, per tensor or along ``axis``."""

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int

    @property
    def per_channel(self) -> bool:
        return self.scale.size > 1

    def dequantize(self, values: np.ndarray) -> np.ndarray:
        shape = [1] * values.ndim
        if self.per_channel:
            shape[self.axis] = -1
        scale, zero = self.scale.reshape(shape), self.zero_point.reshape(shape)
        return ((values.astype(np.float32) - zero.astype(np.float32)) * scale).astype(np.float32)


@dataclass(frozen=True)
class TensorInfo:
    """What the loader needs of one TFLite tensor."""

    index: int
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    signature: tuple[int, ...]  # the shape with -1 for dynamic dims
    buffer: int
    quantization: Quantization | None
    sparsity: tflite.SparsityParameters | None

    @property
    def quantized(self) -> bool:
        return self.quantization is not None


def tensor_info(parsed: TFLiteModel, subgraph: tflite.SubGraph, index: int, limits: Limits) -> TensorInfo:
    """The bounded description of tensor ``index`` of ``subgraph``."""
    tensor = subgraph.Tensors(index)
    name = (tensor.Name() or b"").decode("utf-8", "replace")
    where = f"tensor {index} ({name!r}) of {parsed.described}"
    limits.check("string length", len(name), limits.max_string_length, where)
    if tensor.Type() not in DTYPES:
        kind = TYPE_NAMES.get(tensor.Type(), str(tensor.Type()))
        raise ModelLoadError(f"{where} has element type {kind}, which SpawnML does not read")
    shape = tuple(int_vector(parsed, tensor.ShapeAsNumpy(), f"dims of {where}"))
    signature = tuple(int_vector(parsed, tensor.ShapeSignatureAsNumpy(), f"dims of {where}")) or shape
    limits.check_shape(shape, where)
    if len(signature) != len(shape):
        raise ModelLoadError(f"{where} has shape {shape} but shape signature {signature}")
    return TensorInfo(
        index=index,
        name=name,
        dtype=DTYPES[tensor.Type()],
        shape=shape,
        signature=signature,
        buffer=tensor.Buffer(),
        quantization=_quantization(parsed, tensor, DTYPES[tensor.Type()], len(shape), where),
        sparsity=tensor.Sparsity(),
    )


def _quantization(
    parsed: TFLiteModel, tensor: tflite.Tensor, dtype: np.dtype, rank: int, where: str
) -> Quantization | None:
    params = tensor.Quantization()
    if params is None or params.ScaleLength() == 0 or dtype.kind not in "iu":
        return None
    if params.DetailsType() != tflite.QuantizationDetails.NONE:
        raise ModelLoadError(f"{where} uses custom quantization, which SpawnML does not read")
    channels = parsed.count(f"scales of {where}", params.ScaleLength())
    scale = params.ScaleAsNumpy().astype(np.float32)
    zero = np.asarray(params.ZeroPointAsNumpy() if params.ZeroPointLength() else np.zeros(channels), np.int64)
    axis = params.QuantizedDimension()
    if scale.size != channels or zero.size not in (channels, 1) or (channels > 1 and not 0 <= axis < rank):
        raise ModelLoadError(f"{where} has inconsistent quantization: {channels} scales, axis {axis}")
    return Quantization(scale, np.broadcast_to(zero, scale.shape).astype(dtype), axis)


def constant(parsed: TFLiteModel, info: TensorInfo, limits: Limits) -> np.ndarray | None:
    """The stored value of a constant tensor (densified when sparse), or None for a variable one."""
    data = parsed.buffer(info.buffer)
    if not data:
        return None
    where = f"tensor {info.index} ({info.name!r}) of {parsed.described}"
    if len(data) % info.dtype.itemsize:
        raise ModelLoadError(f"{where}: {len(data)} data bytes are not whole {info.dtype} elements")
    values = np.frombuffer(data, info.dtype)
    if info.sparsity is not None:
        return densify(parsed, values, info.shape, info.sparsity, where)
    if values.size != int(np.prod(info.shape)):
        raise ModelLoadError(
            f"{where} holds {values.size:,} elements but its shape {info.shape} needs more or fewer"
        )
    return values.reshape(info.shape)


def densify(
    parsed: TFLiteModel,
    values: np.ndarray,
    shape: tuple[int, ...],
    sparsity: tflite.SparsityParameters,
    where: str,
) -> np.ndarray:
    """The dense array a TFLite sparse tensor encodes (TACO-style dense/CSR levels with blocks).

    Levels are walked in traversal order, all positions at once: a dense level of size ``n``
    multiplies every position by ``n`` and appends ``0..n-1``; a CSR level replaces each
    position by its segment of indices.
    """
    order = int_vector(parsed, sparsity.TraversalOrderAsNumpy(), f"traversal order of {where}")
    block_map = int_vector(parsed, sparsity.BlockMapAsNumpy(), f"block map of {where}")
    rank = len(shape)
    levels = parsed.count(f"dimension metadata of {where}", sparsity.DimMetadataLength())
    if sorted(order) != list(range(rank + len(block_map))) or levels != len(order):
        raise ModelLoadError(f"{where} has an invalid sparsity traversal order {order}")
    positions = np.zeros(1, np.int64)
    coords = np.zeros((1, 0), np.int64)
    sizes = []
    for level in range(levels):
        meta = sparsity.DimMetadata(level)
        if meta.Format() == tflite.DimensionType.DENSE:
            size = meta.DenseSize()
            parsed.count(f"dense size of {where}", size)
            step = np.arange(size, dtype=np.int64)
            positions = (positions[:, None] * size + step).ravel()
            coords = np.concatenate(
                [np.repeat(coords, size, axis=0), np.tile(step, coords.shape[0])[:, None]], 1
            )
        else:
            segments = _index_vector(parsed, meta.ArraySegments(), meta.ArraySegmentsType(), where)
            indices = _index_vector(parsed, meta.ArrayIndices(), meta.ArrayIndicesType(), where)
            if positions.size and (positions.max() + 1 >= segments.size or np.any(np.diff(segments) < 0)):
                raise ModelLoadError(f"{where} has sparse segments that do not match its dense levels")
            if segments.size and (segments[0] < 0 or segments[-1] > indices.size):
                raise ModelLoadError(f"{where} has sparse segments past its {indices.size} indices")
            starts, counts = segments[positions], segments[positions + 1] - segments[positions]
            parent = np.repeat(np.arange(positions.size), counts)
            offsets = np.arange(parent.size) - np.repeat(np.cumsum(counts) - counts, counts)
            positions = starts[parent] + offsets
            coords = np.concatenate([coords[parent], indices[positions][:, None]], 1)
            size = None
        sizes.append(size)
    if positions.size and positions.max() >= values.size:
        raise ModelLoadError(f"{where} addresses values past its {values.size} stored elements")
    expanded = np.empty_like(coords)
    expanded[:, order] = coords
    dense_index = expanded[:, :rank].copy()
    for block, dim in enumerate(block_map):
        block_size = sizes[order.index(rank + block)]
        if block_size is None:
            raise ModelLoadError(f"{where} has a sparse block dimension, which TFLite does not define")
        dense_index[:, dim] = dense_index[:, dim] * block_size + expanded[:, rank + block]
    if np.any(dense_index >= np.asarray(shape)) or np.any(dense_index < 0):
        raise ModelLoadError(f"{where} has sparse indices outside its shape {shape}")
    dense = np.zeros(shape, values.dtype)
    dense[tuple(dense_index.T)] = values[positions]
    return dense


def _index_vector(parsed: TFLiteModel, table, kind: int, where: str) -> np.ndarray:
    """A sparse-level index vector (a union of int32, uint16 and uint8 vectors) as int64."""
    vectors = {
        tflite.SparseIndexVector.Int32Vector: tflite.Int32Vector,
        tflite.SparseIndexVector.Uint16Vector: tflite.Uint16Vector,
        tflite.SparseIndexVector.Uint8Vector: tflite.Uint8Vector,
    }
    if table is None or kind not in vectors:
        raise ModelLoadError(f"{where} has a sparse level without index vectors")
    vector = vectors[kind]()
    vector.Init(table.Bytes, table.Pos)
    length = parsed.count(f"sparse indices of {where}", vector.ValuesLength(), entry_bytes=1)
    array = vector.ValuesAsNumpy() if length else np.zeros(0)
    if array.size != length:
        raise ModelLoadError(f"{where} has a sparse index vector running past the end of the file")
    return array.astype(np.int64)
