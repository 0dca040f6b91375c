"""Fuse a Conv, the residual Add after it and the activation after that into onnxruntime's
``com.microsoft`` FusedConv, which computes ``activation(Conv(X, W) + B + Z)``.

As onnxruntime's ConvAddActivationFusion does: a Conv whose only reader is an Add of a tensor
of the Conv's shape and type takes that tensor as Z, then an activation after a Conv, or after
a FusedConv that has none yet, becomes the FusedConv's. An Add after an activation stays. SiLU
spelled ``Mul(y, Sigmoid(y))`` and HardSwish, which onnxruntime's FusedConv does not take, become
the SpawnML activations ``Swish`` and ``HardSwish`` of a FusedConv (:data:`OWN_ACTIVATIONS`);
files written for other runtimes get them back as the standard nodes (:mod:`.unfuse`). The
shapes are equal for certain where both values take their height and width from one value
through stride-1 convolutions padded to keep them (a residual block) and their batch and
channel axes are known equal.
"""

from __future__ import annotations

import math

from ..errors import SpawnMLError
from ..ir import Graph, Node
from ..ops.schema import TensorType
from ..ops.shapes import as_text, window_attrs
from .context import MS_DOMAIN, PassContext, import_domain
from .graph_edit import constant, consumers, only_reader, output_names, producers, scalar

#: FusedConv's activations and their attributes, in ``activation_params`` order with defaults.
ACTIVATIONS: dict[str, tuple[tuple[str, float], ...]] = {
    "Relu": (),
    "Tanh": (),
    "Sigmoid": (),
    "LeakyRelu": (("alpha", 0.01),),
    "HardSigmoid": (("alpha", 0.2), ("beta", 0.5)),
    "Clip": (("min", -math.inf), ("max", math.inf)),
}
#: SpawnML's own FusedConv activations, which onnxruntime refuses: ``Swish`` is ``y * sigmoid(y)``
#: (from ``Mul(y, Sigmoid(y))``), ``HardSwish`` ONNX's operator; neither takes parameters.
OWN_ACTIVATIONS = frozenset({"Swish", "HardSwish"})


def fuse_conv_activation(graph: Graph, ctx: PassContext) -> int:
    """Replace Conv -> Add pairs, then Conv -> activation pairs, by FusedConv where a provider
    runs it; return how many."""
    made = producers(graph)
    fused = _fuse_residual_adds(graph, ctx, made)
    return fused + _fuse_activations(graph, ctx, producers(graph) if fused else made)


def _fuse_residual_adds(graph: Graph, ctx: PassContext, made: dict[str, Node]) -> int:
    """Replace each Conv -> Add of a tensor of the Conv's shape by a FusedConv with that tensor as
    Z; ``made`` is the producer of each value."""
    fused, readers, types = 0, None, None
    for add in list(graph.nodes):
        if add.domain or add.op_type != "Add" or len(add.inputs) != 2:
            continue
        for index, name in enumerate(add.inputs):
            conv, residual = made.get(name), add.inputs[1 - index]
            if conv is None or conv.op_type != "Conv" or conv.domain or residual == name:
                continue
            if readers is None:  # found once, at the first candidate
                readers = consumers(graph)
            if only_reader(graph, readers, name) is not add:
                continue
            if _spatial_origin(graph, made, name) != _spatial_origin(graph, made, residual):
                continue  # (checked first: shape inference of a large graph takes milliseconds)
            if types is None:
                types = ctx.types(graph)
            if not _same_leading_axes(types, name, residual):
                continue
            bias = conv.inputs[2] if len(conv.inputs) > 2 else ""
            inputs = [*conv.inputs[:2], bias, residual]
            node = Node("FusedConv", inputs, list(add.outputs), dict(conv.attrs), conv.name, MS_DOMAIN)
            if not ctx.may_replace(graph, [conv, add], node):
                continue
            import_domain(graph, MS_DOMAIN)
            graph.nodes[graph.nodes.index(add)] = node  # where Z is made by now
            graph.nodes.remove(conv)
            fused += 1
            break
    return fused


def _fuse_activations(graph: Graph, ctx: PassContext, made: dict[str, Node]) -> int:
    """Replace Conv -> activation pairs, and FusedConv (without one) -> activation pairs, by
    FusedConv; ``made`` is the producer of each value."""
    fused, readers = 0, None
    for act in list(graph.nodes):
        if act.domain or (act.op_type not in ACTIVATIONS and act.op_type not in ("HardSwish", "Mul")):
            continue
        conv = made.get(act.inputs[0])
        if act.op_type == "Mul" and len(act.inputs) == 2 and conv is not None and conv.op_type == "Sigmoid":
            conv = made.get(act.inputs[1])  # Mul(Sigmoid(y), y): y is the second
        if conv is None or not _takes_activation(conv):
            continue
        if readers is None:  # found once, at the first candidate
            readers = consumers(graph)
        replaced = _replaced(graph, readers, made, conv, act)
        if replaced is None:
            continue
        name = "Swish" if act.op_type == "Mul" else act.op_type
        params = [] if name in OWN_ACTIVATIONS else _params(graph, act)
        if params is None:
            continue
        attrs = {**conv.attrs, "activation": name}
        if params:
            attrs["activation_params"] = params
        node = Node("FusedConv", list(conv.inputs), list(act.outputs), attrs, conv.name, MS_DOMAIN)
        if not ctx.may_replace(graph, replaced, node):
            continue
        import_domain(graph, MS_DOMAIN)
        graph.nodes[graph.nodes.index(conv)] = node
        for part in replaced[1:]:
            graph.nodes.remove(part)
        fused += 1
    return fused


def _replaced(
    graph: Graph, readers: dict[str, list[Node]], made: dict[str, Node], conv: Node, act: Node
) -> list[Node] | None:
    """The nodes a FusedConv of ``conv`` with activation ``act`` replaces, ``conv`` first: with
    the Sigmoid between where ``act`` is SiLU's Mul; None where another node reads what they
    make within (or ``act`` is a Mul of anything else)."""
    made_by_conv = conv.outputs[0]
    if act.op_type != "Mul":
        return [conv, act] if only_reader(graph, readers, made_by_conv) is act else None
    if len(act.inputs) != 2 or made_by_conv not in act.inputs:
        return None
    sigmoid = made.get(act.inputs[1 - act.inputs.index(made_by_conv)])
    if sigmoid is None or sigmoid.domain or sigmoid.op_type != "Sigmoid" or sigmoid.inputs != [made_by_conv]:
        return None
    if only_reader(graph, readers, sigmoid.outputs[0]) is not act or made_by_conv in output_names(graph):
        return None
    if sorted(map(id, readers.get(made_by_conv, []))) != sorted((id(sigmoid), id(act))):
        return None
    return [conv, sigmoid, act]


def _takes_activation(node: Node) -> bool:
    """Whether ``node`` is a Conv, or a FusedConv with no activation yet."""
    if node.op_type == "Conv" and not node.domain:
        return True
    return node.op_type == "FusedConv" and node.domain == MS_DOMAIN and not node.attrs.get("activation")


def _params(graph: Graph, act: Node) -> list[float] | None:
    """The activation's parameters; None when Clip's bounds are not constants."""
    if act.op_type != "Clip" or graph.opset() < 11:
        return [float(act.attrs.get(name, default)) for name, default in ACTIVATIONS[act.op_type]]
    bounds = []
    for index, default in ((1, -math.inf), (2, math.inf)):
        if index < len(act.inputs) and act.inputs[index]:
            bound = scalar(constant(graph, act.inputs[index]))
            if bound is None:
                return None
            bounds.append(bound)
        else:
            bounds.append(default)
    return bounds


# Shapes ----------------------------------------------------------------------------------------


def _spatial_origin(graph: Graph, made: dict[str, Node], name: str) -> str:
    """The value whose spatial sizes (axes from the third on) ``name`` has for certain: back
    through the activations and convolutions that keep them (a residual block's, whose height
    and width shape inference leaves unknown where the model's input does not fix them)."""
    node = made.get(name)
    while node is not None and _keeps_spatial_sizes(graph, node):
        name = node.inputs[0]
        node = made.get(name)
    return name


def _same_leading_axes(types: dict[str, TensorType], a: str, b: str) -> bool:
    """Whether values ``a`` and ``b`` have one element type, one rank and, for certain, one batch
    size and one channel count (sizes or names known and equal)."""
    one, other = types.get(a), types.get(b)
    if one is None or other is None or one.dtype is None or one.dtype != other.dtype:
        return False
    if one.shape is None or other.shape is None or len(one.shape) != len(other.shape) or len(one.shape) < 3:
        return False
    return all(p is not None and p == q for p, q in zip(one.shape[:2], other.shape[:2], strict=True))


def _keeps_spatial_sizes(graph: Graph, node: Node) -> bool:
    """Whether ``node``'s output has its first input's spatial sizes: an activation FusedConv
    takes (elementwise), or a convolution of stride 1 padded by its kernel's extent less one."""
    if not node.domain and (node.op_type in ACTIVATIONS or node.op_type == "HardSwish"):
        return True
    if (node.domain, node.op_type) not in (("", "Conv"), (MS_DOMAIN, "FusedConv")):
        return False
    weights = constant(graph, node.inputs[1])
    kernel = node.attrs.get("kernel_shape") or (None if weights is None else weights.shape[2:])
    if not kernel:
        return False
    try:
        strides, dilations, pads = window_attrs(node.attrs, kernel)
    except SpawnMLError:
        return False
    auto_pad = as_text(node.attrs.get("auto_pad", "NOTSET"))
    if any(stride != 1 for stride in strides):
        return False
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        return True
    count = len(kernel)
    padded = [0] * count if auto_pad == "VALID" else [pads[i] + pads[i + count] for i in range(count)]
    return all(
        pad == (size - 1) * dilation for pad, size, dilation in zip(padded, kernel, dilations, strict=True)
    )
