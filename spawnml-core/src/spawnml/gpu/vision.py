"""Vision and normalization operators on the shared GPU table: convolutions (Conv, FusedConv,
ConvTranspose, CausalConvWithState), pooling, batch / instance / group / local response
normalization, Resize and Pad, and the Constant nodes exported vision models carry.

Window operators run on three spatial axes: a 1-D or 2-D input is viewed with size-1 leading
spatial axes. Window sizes, strides and dilations specialise the kernel; sizes and pads are
scalars, so a new image size reuses the compiled program.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, SpawnMLError
from ..ir import Node
from ..kernel import ir
from ..kernel.ir import Kernel, f32
from ..kernel.library import pad as padding
from ..kernel.library.chain import step
from ..kernel.library.conv import activated, conv_direct, conv_gemm, conv_transpose
from ..kernel.library.norm import batch_norm, group_norm, local_response_norm
from ..kernel.library.pool import average_pool, global_pool, lp_pool, max_pool
from ..kernel.library.reductions import reduce_kernel
from ..kernel.library.resize import resample_axis
from ..kernel.library.scalar_ops import OPS as SCALAR_OPS
from ..ops import resample
from ..ops.defs.nn import CROP, check_legacy_resize, check_resize, legacy_resize_attrs
from ..ops.defs.tensor import constant_value
from ..ops.shapes import (
    as_text,
    normalize_axis,
    resize_output,
    sliding_windows,
    transposed_windows,
    window_attrs,
)
from ..passes.context import MS_DOMAIN
from ..passes.conv_activation import ACTIVATIONS, OWN_ACTIVATIONS
from .array import PHYSICAL, DeviceArray
from .fused import run_chain
from .host import given_on_host
from .shapes import contiguous_strides
from .table import FLOATS, GPU_KERNELS, GPUContext, concatenate, copy_strided, permuted, where
from .unary import swish

Array = DeviceArray
#: Tile of the matrix-product convolution, and the threads of a workgroup-per-row reduction.
TILE, BLOCK = 16, 64
#: The tiled matrix product reuses each loaded value TILE times, which pays where a group
#: has many output channels and each output sums many products; elsewhere (depthwise, few
#: channels) one thread per output reads directly. On the CPU-backed devices of CI (lavapipe,
#: PoCL) the direct kernel wins even above these sizes, as barriers are costly there.
GEMM_MIN_CHANNELS, GEMM_MIN_DEPTH = 32, 256


def _padded(values: Sequence[int], fill: int) -> list[int]:
    """Per-axis values of 1 to 3 spatial axes as three, leading axes filled."""
    return [fill] * (3 - len(values)) + [int(v) for v in values]


@dataclass(frozen=True)
class Windows:
    """Where the windows of a convolution or pooling node lie, on three spatial axes."""

    kernel: list[int]
    strides: list[int]
    dilations: list[int]
    sizes: list[int]
    out: list[int]
    begins: list[int]
    ends: list[int]

    @classmethod
    def of(cls, ctx: GPUContext, x: Array, kernel: Sequence[int], transposed: bool = False) -> Windows:
        spatial = x.shape[2:]
        if not 1 <= len(spatial) <= 3 or len(kernel) != len(spatial):
            raise InvalidArgumentError(
                f"{ctx.node.op_type} on the GPU takes 1 to 3 spatial axes matching kernel_shape "
                f"{list(kernel)}, got input shape {list(x.shape)}"
            )
        strides, dilations, _ = window_attrs(ctx.attrs, kernel)
        axes = (transposed_windows if transposed else sliding_windows)(spatial, ctx.attrs, kernel)
        return cls(
            _padded(kernel, 1),
            _padded(strides, 1),
            _padded(dilations, 1),
            _padded(spatial, 1),
            _padded([out for out, _, _ in axes], 1),
            _padded([begin for _, begin, _ in axes], 0),
            _padded([end for _, _, end in axes], 0),
        )

    @property
    def constants(self) -> tuple[tuple[str, int], ...]:
        """The kernel's ``K*``, ``S*`` and ``D*`` constants, hashable for caching."""
        names = [f"{kind}{axis}" for kind in "KSD" for axis in "DHW"]
        return tuple(zip(names, [*self.kernel, *self.strides, *self.dilations], strict=True))

    @property
    def scalars(self) -> dict[str, int]:
        """Input and output sizes and begin pads (``p*``)."""
        names = ["D", "H", "W", "OD", "OH", "OW", "pd", "ph", "pw"]
        return dict(zip(names, [*self.sizes, *self.out, *self.begins], strict=True))


def _float(x: Array, op: str) -> None:
    if not x.elem.is_float:
        raise InvalidArgumentError(f"{op} on the GPU takes float tensors, not {x.dtype}")


def _grid(ctx: GPUContext, rows: int) -> tuple[int, int]:
    """A 2-D grid of one workgroup per row."""
    across = min(rows, ctx.backend.runtime.max_groups)
    return across, -(-rows // across)


# Convolutions ---------------------------------------------------------------------------------
Activation = tuple[str, tuple[float, ...]]


def _activation(name: str, params: Sequence[float]) -> Callable[[ir.Expr], ir.Expr]:
    """FusedConv's activation with its parameters (infinite Clip bounds are no bounds)."""
    if name == "Swish":  # SpawnML's SiLU: v * sigmoid(v)
        return lambda v: SCALAR_OPS["Mul"].build([v, SCALAR_OPS["Sigmoid"].build([v], {}, f32)], {}, f32)
    if name == "HardSwish":
        return lambda v: SCALAR_OPS["HardSwish"].build([v], {}, f32)
    defaults = ACTIVATIONS[name]
    values = [*params, *(default for _, default in defaults[len(params) :])]
    attrs = {attr: value for (attr, _), value in zip(defaults, values, strict=True) if math.isfinite(value)}
    return lambda v: SCALAR_OPS[name].build([v], attrs, f32)


@cache
def _conv_kernel(which: str, constants: tuple[tuple[str, int], ...], activation: Activation | None) -> Kernel:
    base = {"direct": conv_direct, "gemm": conv_gemm, "transpose": conv_transpose}[which]
    k = base.specialize(T=f32, **dict(constants), **({"TILE": TILE} if which == "gemm" else {}))
    if activation is None:
        return k
    name, params = activation
    return activated(k, _activation(name, params), f"{k.name}_{name.lower()}")


def _bias(ctx: GPUContext, b: Array | None, channels: int) -> Array:
    return b if b is not None else ctx.backend.constant(np.zeros(channels, np.float32), np.float32)


def convolve(
    ctx: GPUContext, x: Array, w: Array, b: Array | None, activation: Activation | None = None
) -> Array:
    """Grouped cross-correlation: a tiled matrix product where the groups are wide enough (and
    its grid fits the device), else one thread per output (depthwise and small convolutions)."""
    _float(x, ctx.node.op_type)
    kernel = ctx.attrs.get("kernel_shape") or w.shape[2:]
    windows = Windows.of(ctx, x, kernel)
    groups = int(ctx.attrs.get("group", 1))
    (batch, channels), out_channels = x.shape[:2], w.shape[0]
    y = ctx.backend.empty((batch, out_channels, *windows.out[3 - len(kernel) :]), x.dtype)
    if not y.size:
        return y
    scalars = {"C": channels, "M": out_channels, "G": groups, **windows.scalars}
    buffers = [x, w, _bias(ctx, b, out_channels), y]
    per_group, depth = out_channels // groups, w.size // out_channels
    grid = (-(-math.prod(windows.out) // TILE), -(-per_group // TILE), batch * groups)
    fits = max(grid) <= ctx.backend.runtime.max_groups
    if per_group >= GEMM_MIN_CHANNELS and depth >= GEMM_MIN_DEPTH and fits:
        ctx.backend.launch(_conv_kernel("gemm", windows.constants, activation), buffers, grid, **scalars)
    else:
        ctx.backend.launch_flat(
            _conv_kernel("direct", windows.constants, activation), buffers, y.size, **scalars
        )
    return y


@GPU_KERNELS.register("Conv", since=1, dtypes=FLOATS)
def conv(ctx: GPUContext, x: Array, w: Array, b: Array | None = None) -> Array:
    return convolve(ctx, x, w, b)


def _check_fused_conv(node: Node, opset: int) -> str | None:
    name = as_text(node.attrs.get("activation", ""))
    if name and name not in ACTIVATIONS and name not in OWN_ACTIVATIONS:
        return f"activation {name!r} is not one of {sorted({*ACTIVATIONS, *OWN_ACTIVATIONS})}"
    if len(node.attrs.get("activation_params") or []) > len(ACTIVATIONS.get(name, ())):
        return f"{name or 'no activation'} takes {len(ACTIVATIONS.get(name, ()))} activation_params"
    if len(node.inputs) > 3 and node.inputs[3]:
        return "the Z (sum) input is not supported on the GPU"
    return None


@GPU_KERNELS.register("FusedConv", domain=MS_DOMAIN, since=1, check=_check_fused_conv, dtypes=FLOATS)
def fused_conv(ctx: GPUContext, x: Array, w: Array, b: Array | None = None) -> Array:
    """``activation(Conv(x, w) + b)``, the activation applied as each output is stored."""
    name = as_text(ctx.attrs.get("activation", ""))
    params = tuple(float(p) for p in ctx.attrs.get("activation_params") or ())
    return convolve(ctx, x, w, b, (name, params) if name else None)


def _check_causal_activation(node: Node, opset: int) -> str | None:
    name = as_text(node.attrs.get("activation", "none"))
    return None if name in ("none", "silu", "swish") else f"activation {name!r} is not none, silu or swish"


@GPU_KERNELS.register("CausalConvWithState", since=27, check=_check_causal_activation, dtypes=FLOATS)
def causal_conv_with_state(
    ctx: GPUContext, x: Array, w: Array, b: Array | None = None, past_state: Array | None = None
) -> tuple[Array, Array]:
    """A depthwise causal 1-D convolution over ``past_state`` (zeros when absent) followed by ``x``,
    SiLU-activated if asked, and the last ``k - 1`` steps as the next state."""
    if len(x.shape) != 3 or len(w.shape) != 3 or w.shape[:2] != (x.shape[1], 1):
        raise InvalidArgumentError(
            "CausalConvWithState takes input (N, C, L) and weight (C, 1, k), "
            f"not {list(x.shape)} and {list(w.shape)}"
        )
    (batch, channels, length), size = x.shape, w.shape[2]
    if past_state is None:
        past_state = ctx.backend.from_numpy(np.zeros((batch, channels, size - 1), x.dtype))
    padded = concatenate(ctx, [past_state, x], 2)
    y = convolve(replace(ctx, attrs={"group": channels}), padded, w, b)
    if as_text(ctx.attrs.get("activation", "none")) != "none":
        y = swish(replace(ctx, attrs={}), y)
    state = ctx.backend.empty((batch, channels, size - 1), x.dtype)
    if state.size:
        copy_strided(
            ctx,
            padded,
            state,
            state.shape,
            contiguous_strides(padded.shape),
            contiguous_strides(state.shape),
            length,
        )
    return y, state


@GPU_KERNELS.register("LRN", dtypes=FLOATS)
def local_response_norm_(ctx: GPUContext, x: Array) -> Array:
    """Local response normalization across the channels of ``(N, C, ...)``."""
    if len(x.shape) < 2:
        raise InvalidArgumentError(f"LRN takes an input of shape (N, C, ...), not {list(x.shape)}")
    y = ctx.backend.empty(x.shape, x.dtype)
    attrs = ctx.attrs
    scalars = {
        "C": x.shape[1],
        "inner": math.prod(x.shape[2:]),
        "size": int(attrs["size"]),
        "alpha": float(attrs.get("alpha", 1e-4)),
        "beta": float(attrs.get("beta", 0.75)),
        "bias": float(attrs.get("bias", 1.0)),
    }
    ctx.backend.launch_flat(local_response_norm.specialize(T=x.elem), [x, y], y.size, **scalars)
    return y


@GPU_KERNELS.register("ConvTranspose", since=1, dtypes=FLOATS)
def conv_transpose_(ctx: GPUContext, x: Array, w: Array, b: Array | None = None) -> Array:
    _float(x, "ConvTranspose")
    kernel = ctx.attrs.get("kernel_shape") or w.shape[2:]
    windows = Windows.of(ctx, x, kernel, transposed=True)
    groups = int(ctx.attrs.get("group", 1))
    (batch, channels), out_channels = x.shape[:2], w.shape[1] * groups
    y = ctx.backend.empty((batch, out_channels, *windows.out[3 - len(kernel) :]), x.dtype)
    scalars = {"C": channels, "M": out_channels, "G": groups, **windows.scalars}
    k = _conv_kernel("transpose", windows.constants, None)
    ctx.backend.launch_flat(k, [x, w, _bias(ctx, b, out_channels), y], y.size, **scalars)
    return y


# Pooling -----------------------------------------------------------------------------------
def _pooled(ctx: GPUContext, x: Array) -> tuple[Windows, Array]:
    kernel = [int(k) for k in ctx.attrs["kernel_shape"]]
    windows = Windows.of(ctx, x, kernel)
    return windows, ctx.backend.empty((*x.shape[:2], *windows.out[3 - len(kernel) :]), x.dtype)


def _scalars(windows: Windows) -> dict[str, int]:
    """Pool scalars: sizes and begin pads (``b*``)."""
    return {k if k[0] != "p" else f"b{k[1]}": v for k, v in windows.scalars.items()}


@GPU_KERNELS.register("MaxPool", since=1)
def max_pool_(ctx: GPUContext, x: Array) -> Array | tuple[Array, Array]:
    """The window maxima and, when the node asks for them, their flat positions (Indices)."""
    windows, y = _pooled(ctx, x)
    wanted = any(ctx.node.outputs[1:])
    column_major = bool(ctx.attrs.get("storage_order", 0))
    indices = (
        ctx.backend.empty(y.shape, np.dtype(np.int64)) if wanted else ctx.backend.constant([0], np.int32)
    )
    k = max_pool.specialize(T=x.elem, INDICES=wanted, COLUMN_MAJOR=column_major, **dict(windows.constants))
    ctx.backend.launch_flat(k, [x, y, indices], y.size, **_scalars(windows))
    return (y, indices) if wanted else y


@GPU_KERNELS.register("AveragePool", since=1, dtypes=FLOATS)
def average_pool_(ctx: GPUContext, x: Array) -> Array:
    _float(x, "AveragePool")
    windows, y = _pooled(ctx, x)
    include = bool(ctx.attrs.get("count_include_pad", 0))
    k = average_pool.specialize(T=f32, INCLUDE_PAD=include, **dict(windows.constants))
    ends = dict(zip(("ed", "eh", "ew"), windows.ends, strict=True))
    ctx.backend.launch_flat(k, [x, y], y.size, **_scalars(windows), **ends)
    return y


@GPU_KERNELS.register("LpPool", since=2, dtypes=FLOATS)
def lp_pool_(ctx: GPUContext, x: Array) -> Array:
    _float(x, "LpPool")
    windows, y = _pooled(ctx, x)
    k = lp_pool.specialize(T=f32, P=int(ctx.attrs.get("p", 2)), **dict(windows.constants))
    ctx.backend.launch_flat(k, [x, y], y.size, **_scalars(windows))
    return y


def _global_pool(ctx: GPUContext, x: Array, average: bool) -> Array:
    _float(x, ctx.node.op_type)
    y = ctx.backend.empty((*x.shape[:2], *(1,) * (len(x.shape) - 2)), x.dtype)
    rows, size = math.prod(x.shape[:2]), math.prod(x.shape[2:])
    if rows and size:
        across, down = _grid(ctx, rows)
        k = global_pool.specialize(T=f32, BLOCK=BLOCK, AVERAGE=average)
        ctx.backend.launch(k, [x, y], (across, down), rows=rows, across=across, D=size)
    return y


@GPU_KERNELS.register("GlobalAveragePool", since=1, dtypes=FLOATS)
def global_average_pool(ctx: GPUContext, x: Array) -> Array:
    return _global_pool(ctx, x, average=True)


@GPU_KERNELS.register("GlobalMaxPool", since=1, dtypes=FLOATS)
def global_max_pool(ctx: GPUContext, x: Array) -> Array:
    return _global_pool(ctx, x, average=False)


# Normalization ---------------------------------------------------------------------------------
def _check_batch_norm(node: Node, opset: int) -> str | None:
    """Training mode (batch statistics, updated running statistics) runs from opset 14 on."""
    statistics = any(node.outputs[1:])
    if opset >= 14:
        training = node.attrs.get("training_mode", 0)
        return "running statistics outputs need training_mode=1" if statistics and not training else None
    if statistics or (opset < 7 and not node.attrs.get("is_test", 0)):
        return "training mode before opset 14 is not run on the GPU"
    if not node.attrs.get("spatial", 1):
        return "spatial=0 (statistics per element) is not run on the GPU"
    return None


@GPU_KERNELS.register("BatchNormalization", since=6, check=_check_batch_norm, dtypes=FLOATS)
def batch_norm_(
    ctx: GPUContext, x: Array, scale: Array, bias: Array, mean: Array, var: Array
) -> Array | tuple[Array, ...]:
    """Inference: the given mean and variance, one per channel (axis 1). Training: the batch's, and
    the running statistics moved toward them by ``1 - momentum``."""
    _float(x, "BatchNormalization")
    if ctx.attrs.get("training_mode", 0):
        batch_mean, batch_var = _channel_statistics(ctx, x)
        momentum = ctx.backend.from_numpy(np.array(ctx.attrs.get("momentum", 0.9), np.float32))
        steps = (
            step("Sub", [0, 1], "float32"),
            step("Mul", [3, 2], "float32"),
            step("Add", [4, 1], mean.dtype.name),
        )
        running = [
            run_chain(ctx, steps, [old, new, momentum], "running_statistic")
            for old, new in ((mean, batch_mean), (var, batch_var))
        ]
        return _normalized(ctx, x, scale, bias, batch_mean, batch_var), *running
    return _normalized(ctx, x, scale, bias, mean, var)


def _channel_statistics(ctx: GPUContext, x: Array) -> tuple[Array, Array]:
    """The mean and (population) variance of each channel (axis 1) over the batch and positions."""
    channels = x.shape[1]
    rows = permuted(ctx, x, [1, 0, *range(2, len(x.shape))]).view((channels, x.size // channels))
    mean = ctx.backend.empty((channels,), x.dtype)
    ctx.backend.launch_flat(reduce_kernel("Mean", x.elem), [rows, mean], channels, D=rows.shape[1], inner=1)
    steps = (step("Sub", [0, 1], "float32"), step("Mul", [2, 2], "float32"))
    squares = run_chain(ctx, steps, [rows, mean.view((channels, 1))], "centred_squares")
    var = ctx.backend.empty((channels,), x.dtype)
    ctx.backend.launch_flat(reduce_kernel("Mean", x.elem), [squares, var], channels, D=rows.shape[1], inner=1)
    return mean, var


def _normalized(ctx: GPUContext, x: Array, scale: Array, bias: Array, mean: Array, var: Array) -> Array:
    y = ctx.backend.empty(x.shape, x.dtype)
    channels = x.shape[1] if len(x.shape) > 1 else 1
    inner = math.prod(x.shape[2:])
    scalars = {"C": channels, "inner": inner, "epsilon": float(ctx.attrs.get("epsilon", 1e-5))}
    k = batch_norm.specialize(T=f32)
    ctx.backend.launch_flat(k, [x, scale, bias, mean, var, y], y.size, **scalars)
    return y


def _normalize_groups(ctx: GPUContext, x: Array, scale: Array, bias: Array, groups: int, share: int) -> Array:
    """Standardize each of ``groups`` channel groups per image, then scale and shift per channel."""
    _float(x, ctx.node.op_type)
    batch, channels = x.shape[:2]
    if channels % groups:
        raise InvalidArgumentError(f"{channels} channels do not split into {groups} groups")
    y = ctx.backend.empty(x.shape, x.dtype)
    rows = batch * groups
    if y.size:
        across, down = _grid(ctx, rows)
        scalars = {
            "rows": rows,
            "across": across,
            "G": groups,
            "channels": channels // groups,
            "inner": math.prod(x.shape[2:]),
            "share": share,
            "epsilon": float(ctx.attrs.get("epsilon", 1e-5)),
        }
        k = group_norm.specialize(T=f32, BLOCK=BLOCK)
        ctx.backend.launch(k, [x, scale, bias, y], (across, down), **scalars)
    return y


@GPU_KERNELS.register("InstanceNormalization", since=6, dtypes=FLOATS)
def instance_norm(ctx: GPUContext, x: Array, scale: Array, bias: Array) -> Array:
    return _normalize_groups(ctx, x, scale, bias, groups=x.shape[1], share=1)


@GPU_KERNELS.register("GroupNormalization", since=18, dtypes=FLOATS)
def group_norm_(ctx: GPUContext, x: Array, scale: Array, bias: Array) -> Array:
    """Scale and bias are per group before opset 21, per channel since."""
    groups = int(ctx.attrs["num_groups"])
    share = x.shape[1] // groups if ctx.opset < 21 and groups else 1
    return _normalize_groups(ctx, x, scale, bias, groups, share)


# Resize -------------------------------------------------------------------------------------
def resize(
    ctx: GPUContext, x: Array, attrs: dict[str, Any], scales: Any, sizes: Any, roi: Any = None
) -> Array:
    """Resample ``x`` one axis at a time through host-computed taps; a crop's outside positions
    then take ``extrapolation_value``."""
    _float(x, ctx.node.op_type)
    rank = len(x.shape)
    axes = [normalize_axis(int(a), rank) for a in attrs.get("axes") or range(rank)]
    policy = as_text(attrs.get("keep_aspect_ratio_policy", "stretch"))
    scales = None if scales is None else [float(s) for s in np.asarray(scales, np.float32).reshape(-1)]
    sizes = None if sizes is None else [int(s) for s in sizes.reshape(-1)]
    out, factors = resize_output(x.shape, scales, sizes, axes, policy)
    crop = as_text(attrs["coordinate_transformation_mode"]) == CROP
    rois = resample.rois(roi, rank, axes)
    mask = np.zeros((1,) * rank, bool)
    y = x
    for dim in range(rank):
        if out[dim] == y.shape[dim] and factors[dim] == 1 and not crop:
            continue
        if crop:
            flags = resample.outside(y.shape[dim], int(out[dim]), float(factors[dim]), attrs, rois[dim])
            mask = mask | flags.reshape(-1, *(1,) * (rank - dim - 1))
        index, weight = resample.taps(y.shape[dim], int(out[dim]), float(factors[dim]), attrs, rois[dim])
        shape = (*y.shape[:dim], int(out[dim]), *y.shape[dim + 1 :])
        result = ctx.backend.empty(shape, x.dtype)
        k = resample_axis.specialize(T=f32, TAPS=len(index))
        buffers = [y, ctx.backend.constant(index, np.int32), ctx.backend.constant(weight, np.float32), result]
        scalars = {"size": y.shape[dim], "out": shape[dim], "inner": max(math.prod(shape[dim + 1 :]), 1)}
        ctx.backend.launch_flat(k, buffers, result.size, **scalars)
        y = result
    if mask.any():
        fill = ctx.backend.from_numpy(np.array(attrs.get("extrapolation_value", 0.0), np.float32))
        y = where(ctx, ctx.backend.from_numpy(mask), fill, y)
    return y


@GPU_KERNELS.register("Resize", since=10, until=11, check=check_legacy_resize, dtypes=FLOATS)
def resize_10(ctx: GPUContext, x: Array, scales: Array) -> Array:
    return resize(ctx, x, legacy_resize_attrs(ctx.attrs), given_on_host(ctx, scales), None)


@GPU_KERNELS.register("Resize", since=11, check=check_resize, dtypes=FLOATS)
def resize_11(
    ctx: GPUContext,
    x: Array,
    roi: Array | None = None,
    scales: Array | None = None,
    sizes: Array | None = None,
) -> Array:
    return resize(
        ctx, x, ctx.attrs, given_on_host(ctx, scales), given_on_host(ctx, sizes), given_on_host(ctx, roi)
    )


@GPU_KERNELS.register("Upsample", since=7, until=9, check=check_legacy_resize, dtypes=FLOATS)
def upsample_7(ctx: GPUContext, x: Array) -> Array:
    return resize(ctx, x, legacy_resize_attrs(ctx.attrs), ctx.attrs["scales"], None)


@GPU_KERNELS.register("Upsample", since=9, until=10, check=check_legacy_resize, dtypes=FLOATS)
def upsample_9(ctx: GPUContext, x: Array, scales: Array) -> Array:
    return resize(ctx, x, legacy_resize_attrs(ctx.attrs), given_on_host(ctx, scales), None)


# Pad -----------------------------------------------------------------------------------------
PAD_MODES = {
    "constant": padding.CONSTANT,
    "reflect": padding.REFLECT,
    "edge": padding.EDGE,
    "wrap": padding.WRAP,
}


def _check_pad(node: Node, opset: int) -> str | None:
    mode = as_text(node.attrs.get("mode", "constant"))
    return None if mode in PAD_MODES else f"mode {mode!r} is not one of {sorted(PAD_MODES)}"


def padded(ctx: GPUContext, x: Array, begins: list[int], ends: list[int], mode: int, value: Array) -> Array:
    """``x`` widened by ``begins``/``ends`` per axis (negative values crop) in pad ``mode``."""
    shape = [size + b + e for size, b, e in zip(x.shape, begins, ends, strict=True)]
    if any(d < 0 for d in shape):
        raise InvalidArgumentError(f"pads {begins + ends} crop more than the input shape {list(x.shape)}")
    y = ctx.backend.empty(shape, x.dtype)
    if y.size and not x.size and mode != padding.CONSTANT:
        raise InvalidArgumentError("padding other than constant needs a non-empty input")
    dims = ctx.backend.constant([*shape, *x.shape, *begins], np.int32)
    k = padding.pad.specialize(T=x.elem, RANK=max(len(shape), 1), MODE=mode)
    ctx.backend.launch_flat(k, [x, value, y, dims], y.size)
    return y


def _axes_of(axes: Sequence[int] | np.ndarray | None, rank: int) -> list[int]:
    return list(range(rank)) if axes is None else [normalize_axis(int(a), rank) for a in axes]


@GPU_KERNELS.register("Pad", since=2, check=_check_pad)
def pad(
    ctx: GPUContext,
    x: Array,
    pads: Array | None = None,
    value: Array | None = None,
    axes: Array | None = None,
) -> Array:
    """Constant, reflect, edge or wrap padding; negative pads crop."""
    rank = len(x.shape)
    if ctx.opset < 11:
        widths = [int(p) for p in ctx.attrs["pads"]]
    else:
        assert pads is not None  # an input from opset 11, required by the schema
        widths = [int(p) for p in ctx.backend.to_numpy(pads).reshape(-1)]
    chosen = _axes_of(given_on_host(ctx, axes), rank)
    if len(widths) != 2 * len(chosen):
        raise InvalidArgumentError(f"Pad has {len(widths)} pads for {len(chosen)} axes")
    begins, ends = [0] * rank, [0] * rank
    for i, axis in enumerate(chosen):
        begins[axis], ends[axis] = widths[i], widths[i + len(chosen)]
    if value is None or value.size == 0:
        fill = float(ctx.attrs.get("value", 0.0)) if ctx.opset < 11 else 0
        value = ctx.backend.constant([fill], x.elem.numpy)
    return padded(ctx, x, begins, ends, PAD_MODES[as_text(ctx.attrs.get("mode", "constant"))], value)


@GPU_KERNELS.register("CenterCropPad", since=18)
def center_crop_pad(ctx: GPUContext, x: Array, shape: Array) -> Array:
    """Each listed axis cropped or zero-padded to its target size, centred (the odd one after)."""
    rank = len(x.shape)
    chosen = _axes_of(ctx.attrs.get("axes"), rank)
    targets = [int(t) for t in ctx.backend.to_numpy(shape).reshape(-1)]
    if len(targets) != len(chosen):
        raise InvalidArgumentError(f"CenterCropPad has {len(targets)} sizes for {len(chosen)} axes")
    begins, ends = [0] * rank, [0] * rank
    for axis, target in zip(chosen, targets, strict=True):
        diff = target - x.shape[axis]
        begins[axis] = diff // 2 if diff >= 0 else -(-diff // 2)
        ends[axis] = diff - begins[axis]
    return padded(ctx, x, begins, ends, padding.CONSTANT, ctx.backend.constant([0], x.elem.numpy))


# Graph constants (exported vision models keep their shapes and scales as Constant nodes) ----
def _check_constant(node: Node, opset: int) -> str | None:
    try:
        value = constant_value(node.attrs)
    except SpawnMLError as error:
        return str(error)
    return None if value.dtype in PHYSICAL else f"GPU tensors do not hold {value.dtype} constants"


@GPU_KERNELS.register("Constant", since=1, check=_check_constant)
def constant(ctx: GPUContext) -> Array:
    return ctx.backend.from_numpy(constant_value(ctx.attrs))
