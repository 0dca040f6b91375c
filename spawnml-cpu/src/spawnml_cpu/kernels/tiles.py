"""Float32 matrix products for convolutions, register-tiled in LLVM IR (through numba).

A 1x1 convolution of one image is ``y (M, P) = w (M, C) @ x (C, P)`` over P pixels. OpenBLAS
copies both operands into its packed layout before each product; here each tile of ``ROWS``
output channels by ``VECTORS`` vectors of pixels keeps its sums in registers while it reads,
for every input channel, the tile's pixels as vectors and each row's weight as one scalar
broadcast: nothing is copied. Bias, residual and clamp are applied to the sums before they are
stored, so no pass over the output follows. On one thread (AVX-512), from cache: 105-116 GFLOP/s
against OpenBLAS's 94-103 on MobileNetV2's shapes; its 34 products one after another, inputs
fresh in cache and weights not, with bias and clamp: 7.29 ms against 7.53; the whole network
10.85 ms against 11.55 (median of 20 after 0.25 s of rest).

Other convolutions read their patches in place the same way (:func:`gathered`): each row of the
patch matrix, one per input channel and kernel tap, found in the input through a table of offsets.

numba cannot hold vectors in registers across a loop (its arrays live in memory), so the tile
is written in LLVM IR with ``<LANES x float>`` values and ``llvm.fma``, as a numba intrinsic.
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np
from llvmlite import binding, ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .loops import NONE, activate

#: Lanes of a vector, tile rows and vectors a tile row: sums of ROWS * VECTORS vectors in
#: registers, with a vector of each row's pixels and a weight (32 registers with AVX-512, 16
#: without).
LANES, ROWS, VECTORS = (16, 6, 4) if binding.get_host_cpu_features().get("avx512f") else (8, 6, 2)
#: Pixels a tile spans.
WIDTH = LANES * VECTORS

_F32, _I32, _I64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
_VEC = ir.VectorType(_F32, LANES)


def _splat(builder: ir.IRBuilder, value: ir.Value, vector: ir.VectorType) -> ir.Value:
    """``value`` in every lane of a ``vector``."""
    undef = ir.Constant(vector, ir.Undefined)
    first = builder.insert_element(undef, value, ir.Constant(_I32, 0))
    return builder.shuffle_vector(
        first, undef, ir.Constant(ir.VectorType(_I32, vector.count), [0] * vector.count)
    )


class _Tile:
    """Emits one tile's IR: pointers are byte addresses (int64), steps are in elements."""

    def __init__(self, builder: ir.IRBuilder, tail: ir.Value) -> None:
        self.builder = builder
        module = builder.module
        mask_type = ir.VectorType(ir.IntType(1), LANES)
        pointer = _VEC.as_pointer()
        self.fma = cgutils.get_or_insert_function(
            module, ir.FunctionType(_VEC, [_VEC] * 3), f"llvm.fma.v{LANES}f32"
        )
        self.masked_load = cgutils.get_or_insert_function(
            module,
            ir.FunctionType(_VEC, [pointer, _I32, mask_type, _VEC]),
            # (named for a typed pointer, as llvmlite's older LLVMs need; newer ones take it too)
            f"llvm.masked.load.v{LANES}f32.p0v{LANES}f32",
        )
        self.masked_store = cgutils.get_or_insert_function(
            module,
            ir.FunctionType(ir.VoidType(), [_VEC, pointer, _I32, mask_type]),
            f"llvm.masked.store.v{LANES}f32.p0v{LANES}f32",
        )
        lanes = ir.Constant(ir.VectorType(_I64, LANES), list(range(LANES)))
        #: The lanes of the last vector that are pixels (the others are neither read nor written).
        self.mask = builder.icmp_signed("<", lanes, _splat(builder, tail, ir.VectorType(_I64, LANES)))

    def at(self, base: ir.Value, elements: ir.Value) -> ir.Value:
        """The byte address ``elements`` float32 elements past ``base``."""
        return self.builder.add(base, self.builder.mul(elements, ir.Constant(_I64, 4)))

    def vector_at(self, base: ir.Value, row: ir.Value, step: ir.Value, vector: int) -> ir.Value:
        """The byte address of vector ``vector`` of row ``row`` from ``base``, rows ``step``
        elements apart."""
        within = ir.Constant(_I64, vector * LANES)
        return self.at(base, self.builder.add(self.builder.mul(row, step), within))

    def scalar(self, address: ir.Value) -> ir.Value:
        """The float at ``address`` in every lane."""
        value = self.builder.load(self.builder.inttoptr(address, _F32.as_pointer()), align=4)
        return _splat(self.builder, value, _VEC)

    def load(self, address: ir.Value, vector: int) -> ir.Value:
        """Vector ``vector`` of a tile's row from ``address`` (the last one masked)."""
        pointer = self.builder.inttoptr(address, _VEC.as_pointer())
        if vector < VECTORS - 1:
            return self.builder.load(pointer, align=4)
        zero = ir.Constant(_VEC, [0.0] * LANES)
        return self.builder.call(self.masked_load, [pointer, ir.Constant(_I32, 4), self.mask, zero])

    def store(self, value: ir.Value, address: ir.Value, vector: int) -> None:
        """``value`` as vector ``vector`` of a tile's row at ``address`` (the last one masked)."""
        pointer = self.builder.inttoptr(address, _VEC.as_pointer())
        if vector < VECTORS - 1:
            self.builder.store(value, pointer, align=4)
        else:
            self.builder.call(self.masked_store, [value, pointer, ir.Constant(_I32, 4), self.mask])


def _tile(residual: bool, gathered: bool = False) -> Callable:
    """The intrinsic ``tile(w, x, y, extra, bias, depth, pixels, tail, low, high, offsets)``:
    ``y[r, :] = clamp(sum over c < depth of w[r, c] * x[c, :] + bias[r] (+ extra[r, :] where
    ``residual``), low, high)`` for ROWS rows r and VECTORS vectors of pixels, the last with
    ``tail`` lanes. ``w``'s rows are ``depth`` elements apart, those of ``y`` and ``extra``
    ``pixels``; row c of ``x`` is ``pixels * c`` elements past ``x``, or where ``gathered``,
    ``offsets[c]`` elements (``offsets``: int64): a convolution's rows of patches read in place
    from its input, one per channel and kernel tap. The operands are given by their byte
    addresses."""
    signature = types.void(*[types.int64] * 8, types.float32, types.float32, types.int64)

    def codegen(context, builder, sig, args):
        w, x, y, extra, bias, depth, pixels, tail, low, high, offsets = args
        tile = _Tile(builder, tail)
        entry = builder.basic_block
        loop = builder.append_basic_block("tile.channels")
        finish = builder.append_basic_block("tile.finish")
        builder.branch(loop)

        builder.position_at_end(loop)
        channel = builder.phi(_I64)
        channel.add_incoming(ir.Constant(_I64, 0), entry)
        sums = [builder.phi(_VEC) for _ in range(ROWS * VECTORS)]
        for total in sums:
            total.add_incoming(ir.Constant(_VEC, [0.0] * LANES), entry)
        if gathered:
            step = builder.add(offsets, builder.mul(channel, ir.Constant(_I64, 8)))
            row = builder.load(builder.inttoptr(step, _I64.as_pointer()), align=8)
            inputs = [tile.load(tile.vector_at(x, row, ir.Constant(_I64, 1), v), v) for v in range(VECTORS)]
        else:
            inputs = [tile.load(tile.vector_at(x, channel, pixels, v), v) for v in range(VECTORS)]
        updated = []
        for row in range(ROWS):
            weight = tile.scalar(tile.at(w, builder.add(builder.mul(ir.Constant(_I64, row), depth), channel)))
            updated += [
                builder.call(tile.fma, [weight, inputs[v], sums[row * VECTORS + v]]) for v in range(VECTORS)
            ]
        following = builder.add(channel, ir.Constant(_I64, 1))
        channel.add_incoming(following, loop)
        for total, value in zip(sums, updated, strict=True):
            total.add_incoming(value, loop)
        builder.cbranch(builder.icmp_signed("<", following, depth), loop, finish)

        builder.position_at_end(finish)
        low_vector, high_vector = _splat(builder, low, _VEC), _splat(builder, high, _VEC)
        for row in range(ROWS):
            index = ir.Constant(_I64, row)
            shift = tile.scalar(tile.at(bias, index))
            for v in range(VECTORS):
                value = builder.fadd(updated[row * VECTORS + v], shift)
                if residual:
                    value = builder.fadd(value, tile.load(tile.vector_at(extra, index, pixels, v), v))
                # NaN stays NaN: comparisons with it are false, so neither bound replaces it
                value = builder.select(builder.fcmp_ordered("<", value, low_vector), low_vector, value)
                value = builder.select(builder.fcmp_ordered(">", value, high_vector), high_vector, value)
                tile.store(value, tile.vector_at(y, index, pixels, v), v)
        return context.get_dummy_value()

    def tile(typingctx, w, x, y, extra, bias, depth, pixels, tail, low, high, offsets):
        return signature, codegen

    return intrinsic(tile)


_TILE = _tile(residual=False)
_TILE_WITH_RESIDUAL = _tile(residual=True)
_TILE_GATHERED = _tile(residual=False, gathered=True)


def fits(outputs: int, depth: int, pixels: int) -> bool:
    """Whether :func:`pointwise` takes products of ``outputs`` rows, ``depth`` deep, over
    ``pixels`` pixels: a tile's rows, some depth, and pixels enough that at most the last vector
    of a tile is partly used."""
    return outputs >= ROWS and depth > 0 and pixels > WIDTH - LANES


@numba.njit(nogil=True, cache=True)
def pointwise(
    w: np.ndarray,
    x: np.ndarray,
    bias: np.ndarray,
    low: float,
    high: float,
    residual: np.ndarray | None,
    y: np.ndarray,
    activation: tuple[int, float, float],
) -> None:
    """``y (M, P) = clamp(w (M, C) @ x (C, P) + bias[m] + residual, low, high)``: float32,
    C-contiguous, shapes as :func:`fits` takes; ``residual`` is ``y``'s shape or None. Then
    ``activation`` (:func:`.loops.activate`), over each tile's rows right after it is stored,
    while they are in L1 (in the tile's IR it would take vector exp written in IR too). The last
    tile of each axis is moved back to end at the edge (computing some sums twice); pixel rows
    narrower than a tile take one whose last vector is partly used."""
    outputs, depth = w.shape
    pixels = x.shape[1]
    span = min(pixels, WIDTH)
    tail = span - (VECTORS - 1) * LANES
    low32, high32 = np.float32(low), np.float32(high)
    w_at, x_at, y_at, bias_at = w.ctypes.data, x.ctypes.data, y.ctypes.data, bias.ctypes.data
    extra_at = 0 if residual is None else residual.ctypes.data
    for first in range(0, pixels, span):
        column = min(first, pixels - span)
        for top in range(0, outputs, ROWS):
            row = min(top, outputs - ROWS)
            start = 4 * (row * pixels + column)  # of the tile's outputs, in bytes
            weights, inputs, shifts = w_at + 4 * row * depth, x_at + 4 * column, bias_at + 4 * row
            if residual is None:
                _TILE(weights, inputs, y_at + start, 0, shifts, depth, pixels, tail, low32, high32, 0)
            else:
                _TILE_WITH_RESIDUAL(
                    weights,
                    inputs,
                    y_at + start,
                    extra_at + start,
                    shifts,
                    depth,
                    pixels,
                    tail,
                    low32,
                    high32,
                    0,
                )
            if activation[0] != NONE:  # (a tile moved back recomputes its sums, so none is activated twice)
                for r in range(row, row + ROWS):
                    activate(y[r], column, column + span, activation)


@numba.njit(nogil=True, cache=True)
def gathered(w: np.ndarray, x: np.ndarray, offsets: np.ndarray, y: np.ndarray, band: int) -> None:
    """``y[m, p] = sum over j of w[m, j] * x[offsets[j] + p]``: ``w (M, D)``, ``y (M, P)`` and
    ``offsets (D,)`` (int64) C-contiguous, shapes as :func:`fits` takes, every
    ``offsets[j] + p`` inside ``x`` (flat float32). A convolution's product read in place from
    its input (see :mod:`.conv_implicit`), with no patches copied.

    The pixels go in bands of ``band`` tiles: every tile's rows of weights then run over the
    band's pixels while the input rows they read stay in cache."""
    outputs, depth = w.shape
    pixels = y.shape[1]
    span = min(pixels, WIDTH)
    tail = span - (VECTORS - 1) * LANES
    zeros = np.zeros(ROWS, np.float32)
    unbounded = np.float32(np.inf)
    w_at, x_at, y_at, table = w.ctypes.data, x.ctypes.data, y.ctypes.data, offsets.ctypes.data
    for start in range(0, pixels, band * span):
        stop = min(start + band * span, pixels)
        for top in range(0, outputs, ROWS):
            row = min(top, outputs - ROWS)
            for first in range(start, stop, span):
                column = min(first, pixels - span)
                _TILE_GATHERED(
                    w_at + 4 * row * depth,
                    x_at + 4 * column,
                    y_at + 4 * (row * pixels + column),
                    0,
                    zeros.ctypes.data,
                    depth,
                    pixels,
                    tail,
                    -unbounded,
                    unbounded,
                    table,
                )
