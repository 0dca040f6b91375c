"""Einsum on the GPU, composed from the shared kernels.

Each operand first takes its diagonals (a letter repeated in its term: one strided copy) and sums
out the letters no other operand and not the output uses (a row reduction). Operands are then
contracted left to right as batched matrix products: the letters both share and a later operand
or the output needs are the batch, the other shared ones are summed over, and the rest are rows
and columns. A last transpose puts the result in the output's order. An ellipsis stands for the
same dims in every operand (their sizes must agree; broadcasting size-1 dims is refused).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from ..errors import InvalidArgumentError
from ..kernel.library.reductions import reduce_kernel
from ..ops.shapes import as_text
from .array import DeviceArray
from .shapes import contiguous_strides
from .table import ALL_FLOATS, GPU_KERNELS, GPUContext, copy_strided, matmul, permuted

#: Letters standing for an ellipsis' dims, outside the ASCII letters an equation uses.
_ELLIPSIS_LETTERS = "".join(chr(0x3B1 + i) for i in range(24))


def _terms(equation: str, ranks: Sequence[int]) -> tuple[list[str], str]:
    """Each operand's letters and the output's, with every ellipsis spelled out."""
    text = equation.replace(" ", "")
    inputs, arrow, output = text.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(ranks):
        raise InvalidArgumentError(f"einsum {equation!r} names {len(terms)} operands, given {len(ranks)}")
    spans = [rank - (len(term) - 3) for term, rank in zip(terms, ranks, strict=True) if "..." in term]
    width = max(spans, default=0)
    ellipsis = _ELLIPSIS_LETTERS[:width]
    spelled = []
    for term, rank in zip(terms, ranks, strict=True):
        if "..." in term:
            term = term.replace("...", ellipsis[width - (rank - (len(term) - 3)) :])
        if len(term) != rank:
            raise InvalidArgumentError(f"einsum term {term!r} does not fit an operand of rank {rank}")
        spelled.append(term)
    if not arrow:
        counts = Counter("".join(spelled))
        output = ellipsis + "".join(sorted(c for c in counts if counts[c] == 1 and c not in ellipsis))
    else:
        output = output.replace("...", ellipsis)
    return spelled, output


def _diagonal(ctx: GPUContext, x: DeviceArray, term: str) -> tuple[DeviceArray, str]:
    """``x`` with each repeated letter's axes reduced to their diagonal."""
    letters = "".join(dict.fromkeys(term))
    if letters == term:
        return x, term
    strides = contiguous_strides(x.shape)
    shape, steps = [], []
    for letter in letters:
        axes = [i for i, c in enumerate(term) if c == letter]
        if len({x.shape[i] for i in axes}) != 1:
            raise InvalidArgumentError(f"einsum letter {letter!r} labels axes of different sizes")
        shape.append(x.shape[axes[0]])
        steps.append(sum(strides[i] for i in axes))
    out = ctx.backend.empty(shape, x.dtype)
    if out.size:
        copy_strided(ctx, x, out, shape, steps, contiguous_strides(shape))
    return out, letters


def _summed(ctx: GPUContext, x: DeviceArray, term: str, keep: str) -> tuple[DeviceArray, str]:
    """``x`` summed over the letters of ``term`` not in ``keep``."""
    kept = [i for i, c in enumerate(term) if c in keep]
    if len(kept) == len(term):
        return x, term
    order = kept + [i for i in range(len(term)) if i not in kept]
    source = permuted(ctx, x, order)
    size = math.prod(x.shape[i] for i in order[len(kept) :])
    shape = tuple(x.shape[i] for i in kept)
    out = ctx.backend.empty(shape, x.dtype)
    if size == 0:
        return ctx.backend.from_numpy(np.zeros(shape, x.dtype)), "".join(term[i] for i in kept)
    ctx.backend.launch_flat(reduce_kernel("Sum", x.elem), [source, out], out.size, D=size, inner=1)
    return out, "".join(term[i] for i in kept)


def _arranged(ctx: GPUContext, x: DeviceArray, term: str, order: str) -> DeviceArray:
    perm = [term.index(c) for c in order]
    return x if perm == list(range(len(perm))) else permuted(ctx, x, perm)


def _contract(
    ctx: GPUContext, a: DeviceArray, a_term: str, b: DeviceArray, b_term: str, needed: str
) -> tuple[DeviceArray, str]:
    """``a`` and ``b`` multiplied and summed over the letters they share that nothing later needs."""
    sizes = dict(zip(a_term, a.shape, strict=True)) | dict(zip(b_term, b.shape, strict=True))
    for letter in set(a_term) & set(b_term):
        if a.shape[a_term.index(letter)] != b.shape[b_term.index(letter)]:
            raise InvalidArgumentError(f"einsum letter {letter!r} labels axes of different sizes")
    batch = "".join(c for c in a_term if c in b_term and c in needed)
    summed = "".join(c for c in a_term if c in b_term and c not in needed)
    rows = "".join(c for c in a_term if c not in b_term)
    columns = "".join(c for c in b_term if c not in a_term)
    dims = [math.prod(sizes[c] for c in group) for group in (batch, rows, summed, columns)]
    left = _arranged(ctx, a, a_term, batch + rows + summed).view((dims[0], dims[1], dims[2]))
    right = _arranged(ctx, b, b_term, batch + summed + columns).view((dims[0], dims[2], dims[3]))
    product = matmul(ctx, left, right)
    term = batch + rows + columns
    return product.view(tuple(sizes[c] for c in term)), term


@GPU_KERNELS.register("Einsum", since=12, dtypes=ALL_FLOATS)
def einsum(ctx: GPUContext, *operands: DeviceArray) -> DeviceArray:
    terms, output = _terms(as_text(ctx.attrs["equation"]), [len(x.shape) for x in operands])
    values = [_diagonal(ctx, x, term) for x, term in zip(operands, terms, strict=True)]
    later = [output + "".join(t for _, t in values[i + 1 :]) for i in range(len(values))]
    others = ["".join(t for j, (_, t) in enumerate(values) if j != i) for i in range(len(values))]
    values = [_summed(ctx, x, t, output + others[i]) for i, (x, t) in enumerate(values)]
    x, term = values[0]
    for i, (y, y_term) in enumerate(values[1:], start=1):
        x, term = _contract(ctx, x, term, y, y_term, later[i])
    x, term = _summed(ctx, x, term, output)
    return _arranged(ctx, x, term, output)
