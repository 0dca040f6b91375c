"""A convolutional ONNX graph run node by node with PyTorch's eager operators on any torch device.

This is the benchmarks' PyTorch reference for models that exist only as ONNX files (PP-OCRv4
det and rec): the same graph and weights, with PyTorch's kernels (cuDNN's convolutions on a GPU).
It covers the operators of static convolutional networks and of rec's attention blocks, in the
semantics of the opsets those files use (rec's is 12), and refuses any other by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper


def _conv(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None, **a: Any) -> torch.Tensor:
    pads = a.get("pads", [0] * (2 * (w.dim() - 2)))
    half = len(pads) // 2
    if pads[:half] != pads[half:]:
        raise NotImplementedError(f"asymmetric padding {pads}")
    return F.conv2d(x, w, b, a.get("strides", 1), pads[:half], a.get("dilations", 1), a.get("group", 1))


def _conv_transpose(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None, **a: Any
) -> torch.Tensor:
    pads = a.get("pads", [0, 0, 0, 0])
    if pads[:2] != pads[2:] or a.get("output_padding") or a.get("output_shape"):
        raise NotImplementedError("ConvTranspose with asymmetric padding or an output shape")
    return F.conv_transpose2d(
        x, w, b, a.get("strides", 1), pads[:2], 0, a.get("group", 1), a.get("dilations", 1)
    )


def _resize(x: torch.Tensor, roi: Any = None, scales: torch.Tensor | None = None, **a: Any) -> torch.Tensor:
    nearest = (a.get("mode", b"nearest"), a.get("coordinate_transformation_mode"), a.get("nearest_mode"))
    if nearest != (b"nearest", b"asymmetric", b"floor") or scales is None:
        raise NotImplementedError(f"Resize {nearest}")
    return F.interpolate(x, scale_factor=[float(s) for s in scales[2:]], mode="nearest")


def _average_pool(x: torch.Tensor, **a: Any) -> torch.Tensor:
    pads = a.get("pads", [0, 0, 0, 0])
    if pads[:2] != pads[2:]:
        raise NotImplementedError(f"AveragePool with asymmetric padding {pads}")
    return F.avg_pool2d(
        x,
        a["kernel_shape"],
        a.get("strides", 1),
        pads[:2],
        bool(a.get("ceil_mode", 0)),
        bool(a.get("count_include_pad", 0)),
    )


def _slice(
    x: torch.Tensor,
    starts: torch.Tensor,
    ends: torch.Tensor,
    axes: torch.Tensor | None = None,
    steps: torch.Tensor | None = None,
) -> torch.Tensor:
    index = [slice(None)] * x.dim()
    axes_list = range(len(starts)) if axes is None else axes.tolist()
    steps_list = [1] * len(starts) if steps is None else steps.tolist()
    for axis, start, end, step in zip(axes_list, starts.tolist(), ends.tolist(), steps_list, strict=True):
        if step != 1:
            raise NotImplementedError(f"Slice with step {step}")
        index[axis] = slice(start, end)
    return x[tuple(index)]


def _reshape(x: torch.Tensor, shape: torch.Tensor) -> torch.Tensor:
    sizes = [x.shape[axis] if size == 0 else size for axis, size in enumerate(shape.tolist())]
    return x.reshape(sizes)


def _softmax(x: torch.Tensor, axis: int = 1) -> torch.Tensor:
    """Softmax as opsets 1-12 define it: over all axes from ``axis`` on, taken as one."""
    return F.softmax(x.flatten(axis % x.dim()), dim=-1).reshape(x.shape)


#: ONNX element type codes to torch types, for Cast.
_TYPES = {1: torch.float32, 6: torch.int32, 7: torch.int64, 11: torch.float64}

OPERATORS: dict[str, Callable[..., torch.Tensor]] = {
    "Add": lambda a, b: a + b,
    "Sub": lambda a, b: a - b,
    "Mul": lambda a, b: a * b,
    "Div": lambda a, b: a / b,
    "Pow": lambda a, b: torch.pow(a, b),
    "Sqrt": lambda x: torch.sqrt(x),
    "MatMul": lambda a, b: torch.matmul(a, b),
    "Relu": lambda x: torch.relu(x),
    "Sigmoid": lambda x: torch.sigmoid(x),
    "Clip": lambda x, lo=None, hi=None: torch.clamp(x, lo, hi),
    "HardSigmoid": lambda x, alpha=0.2, beta=0.5: torch.clamp(x * alpha + beta, 0, 1),
    "GlobalAveragePool": lambda x: x.mean(dim=(2, 3), keepdim=True),
    "AveragePool": _average_pool,
    "ReduceMean": lambda x, axes, keepdims=1: x.mean(dim=axes, keepdim=bool(keepdims)),
    "Softmax": _softmax,
    "BatchNormalization": lambda x, s, b, m, v, epsilon=1e-5, momentum=0.9: F.batch_norm(
        x, m, v, s, b, False, 0, epsilon
    ),
    "Concat": lambda *xs, axis: torch.cat(xs, dim=axis),
    "Shape": lambda x: torch.tensor(x.shape, dtype=torch.int64, device=x.device),
    "Cast": lambda x, to: x.to(_TYPES[to]),
    "Slice": _slice,
    "Reshape": _reshape,
    "Transpose": lambda x, perm: x.permute(perm),
    "Squeeze": lambda x, axes: x.squeeze(tuple(axes)),
    "Conv": _conv,
    "ConvTranspose": _conv_transpose,
    "Resize": _resize,
}


def torch_runner(path: str, device: str) -> Callable[[dict[str, np.ndarray]], list[np.ndarray]]:
    """A function running the ONNX model at ``path`` on torch ``device``, host arrays in and out."""
    model = onnx.load(path)
    graph = model.graph
    values: dict[str, torch.Tensor] = {
        t.name: torch.from_numpy(numpy_helper.to_array(t).copy()).to(device) for t in graph.initializer
    }
    steps = []
    for node in graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Constant":
            values[node.output[0]] = torch.from_numpy(numpy_helper.to_array(attrs["value"]).copy()).to(device)
        elif node.op_type in OPERATORS:
            steps.append((OPERATORS[node.op_type], list(node.input), node.output[0], attrs))
        else:
            raise NotImplementedError(f"{node.op_type} has no torch counterpart here")
    outputs = [o.name for o in graph.output]
    # The values each step reads for the last time, released after it (as a runtime frees them).
    last_reader = {name: index for index, (_, inputs, _, _) in enumerate(steps) for name in inputs if name}
    releases = [
        [name for name in dict.fromkeys(inputs) if last_reader.get(name) == index and name not in outputs]
        for index, (_, inputs, _, _) in enumerate(steps)
    ]

    @torch.inference_mode()
    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        env = dict(values) | {name: torch.from_numpy(array).to(device) for name, array in feeds.items()}
        for (operator, inputs, output, attrs), released in zip(steps, releases, strict=True):
            env[output] = operator(*(env[name] if name else None for name in inputs), **attrs)
            for name in released:
                del env[name]
        return [env[name].cpu().numpy() for name in outputs]

    return run
