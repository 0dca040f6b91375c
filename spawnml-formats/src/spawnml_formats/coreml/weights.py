"""Neural-network layer weights (``WeightParams``): float32, float16, and 1- to 8-bit quantized values.

Quantized weights are dequantized at load: linear quantization (``w = q * scale + bias``, per
tensor or per output channel) and look-up tables (``w = table[q]``); values of fewer than 8 bits
are packed most significant bit first.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from spawnml import Limits, ModelLoadError


def weight_array(params: Any, shape: tuple[int, ...], limits: Limits, where: str) -> np.ndarray:
    """The float32 values of ``params`` as an array of ``shape`` (bounded, its element count checked)."""
    count = limits.check_shape(tuple(int(dim) for dim in shape), where)
    if len(params.floatValue):
        values = np.asarray(params.floatValue, np.float32)
    elif params.float16Value:
        values = _from_bytes(params.float16Value, np.float16, where).astype(np.float32)
    elif params.rawValue or params.int8RawValue:
        values = _dequantize(params, count, where)
    else:
        values = np.zeros(0, np.float32)
    if values.size != count:
        raise ModelLoadError(f"{where} holds {values.size:,} values, but its shape {shape} needs {count:,}")
    return values.reshape(shape)


def _from_bytes(data: bytes, dtype: type, where: str) -> np.ndarray:
    if len(data) % np.dtype(dtype).itemsize:
        raise ModelLoadError(f"{where}: {len(data)} bytes are not whole {np.dtype(dtype)} values")
    return np.frombuffer(data, dtype)


def _dequantize(params: Any, count: int, where: str) -> np.ndarray:
    quant = params.quantization
    bits = quant.numberOfBits
    if params.int8RawValue:
        if bits != 8:
            raise ModelLoadError(f"{where} holds int8 values quantized to {bits} bits")
        values = _from_bytes(params.int8RawValue, np.int8, where)
    else:
        values = _unpack(params.rawValue, count, bits, where)
    kind = quant.WhichOneof("QuantizationType")
    if kind == "lookupTableQuantization":
        table = np.asarray(quant.lookupTableQuantization.floatValue, np.float32)
        if table.size != 1 << bits or params.int8RawValue:
            raise ModelLoadError(f"{where} has a look-up table of {table.size} entries for {bits}-bit values")
        return table[values]
    if kind != "linearQuantization":
        raise ModelLoadError(f"{where} is quantized without parameters")
    scale = np.asarray(quant.linearQuantization.scale, np.float32)
    bias = np.asarray(quant.linearQuantization.bias, np.float32)
    channels = max(scale.size, bias.size, 1)
    if values.size != count or count % channels or scale.size not in (1, channels) or bias.size > channels:
        raise ModelLoadError(
            f"{where} has {scale.size} scales and {bias.size} biases for {values.size} values"
        )
    rows = values.reshape(channels, -1).astype(np.float32) * scale.reshape(-1, 1)
    if bias.size:
        rows += bias.reshape(-1, 1)
    return rows.ravel()


def _unpack(data: bytes, count: int, bits: int, where: str) -> np.ndarray:
    """``count`` unsigned ``bits``-bit values packed most significant bit first."""
    if not 1 <= bits <= 8:
        raise ModelLoadError(f"{where} is quantized to {bits} bits; Core ML defines 1 to 8")
    if len(data) != -(-count * bits // 8):
        raise ModelLoadError(f"{where} holds {len(data):,} bytes, not {count:,} {bits}-bit values")
    packed = np.frombuffer(data, np.uint8)
    if bits == 8:
        return packed
    stream = np.unpackbits(packed)[: count * bits].reshape(count, bits)
    return (stream @ (1 << np.arange(bits - 1, -1, -1))).astype(np.uint8)
