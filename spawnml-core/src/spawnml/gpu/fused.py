"""Generated elementwise kernels: a chain of scalar operators in one dispatch.

``ai.spawnml::FusedElementwise`` (what the elementwise fusion pass makes) runs its chain
here, and single operators without a hand-written map run as chains of one step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..kernel.library.chain import Chain, chain_kernel, decode, step
from ..ops.defs.fused import DOMAIN
from .array import DeviceArray, physical
from .shapes import broadcast_strides
from .table import GPU_KERNELS, GPUContext


def run_chain(ctx: GPUContext, chain: Chain, inputs: Sequence[DeviceArray], name: str) -> DeviceArray:
    """The last step of ``chain`` over ``inputs`` broadcast against each other, in one launch."""
    shape = np.broadcast_shapes(*(x.shape for x in inputs))
    out = ctx.backend.empty(shape, np.dtype(chain[-1].dtype))
    if not out.size:
        return out
    strided = tuple(x.size != out.size for x in inputs)
    types = tuple(physical(np.dtype(s.dtype)) for s in chain)
    k = chain_kernel(name, chain, tuple(x.elem for x in inputs), types, len(shape), strided)
    buffers = [*inputs, out]
    if any(strided):
        rows = [broadcast_strides(x.shape, shape) for x, wide in zip(inputs, strided, strict=True) if wide]
        buffers.append(ctx.backend.constant([*shape, *(s for row in rows for s in row)]))
    ctx.backend.launch_flat(k, buffers, out.size)
    return out


def scalar(ctx: GPUContext, value: float | np.floating) -> DeviceArray:
    """A float32 operand of one element, broadcast by the chain it enters."""
    return ctx.backend.from_numpy(np.array(value, np.float32))


#: A value of a chain being built: ``("input", k)`` or ``("step", j)``.
ChainValue = tuple[str, int]


@dataclass
class ChainBuilder:
    """An elementwise chain built step by step; inputs may be added between steps (references
    are resolved when it runs, inputs first)."""

    inputs: list[DeviceArray] = field(default_factory=list)
    steps: list[tuple[str, tuple[ChainValue, ...], dict[str, object]]] = field(default_factory=list)

    def input(self, x: DeviceArray) -> ChainValue:
        self.inputs.append(x)
        return ("input", len(self.inputs) - 1)

    def add(self, op: str, *refs: ChainValue, **attrs: object) -> ChainValue:
        self.steps.append((op, refs, attrs))
        return ("step", len(self.steps) - 1)

    def run(self, ctx: GPUContext, dtype: np.dtype, name: str) -> DeviceArray:
        """The last step's value, of ``dtype`` (the others in float32)."""

        def index(ref: ChainValue) -> int:
            return ref[1] if ref[0] == "input" else len(self.inputs) + ref[1]

        last = len(self.steps) - 1
        chain = tuple(
            step(op, [index(r) for r in refs], dtype.name if j == last else "float32", attrs)
            for j, (op, refs, attrs) in enumerate(self.steps)
        )
        return run_chain(ctx, chain, self.inputs, name)


@GPU_KERNELS.register("FusedElementwise", DOMAIN)
def fused_elementwise(ctx: GPUContext, *inputs: DeviceArray) -> DeviceArray:
    return run_chain(ctx, decode(ctx.attrs["chain"], len(inputs)), inputs, "fused_elementwise")
