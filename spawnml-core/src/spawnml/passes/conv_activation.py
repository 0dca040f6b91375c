"""Fuse a Conv, the residual Add after it and the activation after that into onnxruntime's
``com.microsoft`` FusedConv, which computes ``activation(Conv(X, W) + B + Z)``.

As onnxruntime's ConvAddActivationFusion does: a Conv whose only reader is an Add of a tensor
of the Conv's shape and type takes that tensor as Z, then an activation after a Conv, or after
a FusedConv that has none yet, becomes the FusedConv's. An Add after an activation stays. SiLU
spelled ``Mul(y, Sigmoid(y))`` and HardSwish (the operator, or from opset 14 on spelled out as
``y * Clip(y + 3, 0, 6) / 6``), which onnxruntime's FusedConv does not take, become
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
        if act.domain or (act.op_type not in ACTIVATIONS and act.op_type not in ("HardSwish", "Mul", "Div")):
            continue
        if readers is None:  # found once, at the first candidate
            readers = consumers(graph)
        decomposed = _hard_swish_parts(graph, readers, made, act) if act.op_type in ("Mul", "Div") else None
        if decomposed is not None:
            replaced, name = decomposed, "HardSwish"
        elif act.op_type == "Div":
            continue
        else:
            conv = made.get(act.inputs[0])
            if (
                act.op_type == "Mul"
                and len(act.inputs) == 2
                and conv is not None
                and conv.op_type == "Sigmoid"
            ):
                conv = made.get(act.inputs[1])  # Mul(Sigmoid(y), y): y is the second
            if conv is None or not _takes_activation(conv):
                continue
            found = _replaced(graph, readers, made, conv, act)
            if found is None:
                continue
            replaced, name = found, "Swish" if act.op_type == "Mul" else act.op_type
        conv = replaced[0]
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


def _hard_swish_parts(
    graph: Graph, readers: dict[str, list[Node]], made: dict[str, Node], act: Node
) -> list[Node] | None:
    """The nodes of HardSwish spelled out, ``y * Clip(y + 3, 0, 6) / 6`` (as exporters write it
    where they do not use the operator: PyTorch before opset 14, Paddle), ending in ``act``, the
    convolution that makes ``y`` first. The division by 6 may be a product by 1/6, and may come
    before the product by ``y``. None where ``act`` ends no such chain after a Conv (or a FusedConv
    without activation), or another node reads a value the chain makes within, or the graph's
    opset is below 14: files written for other runtimes get the HardSwish operator back
    (:mod:`.unfuse`), which came in opset 14."""
    if graph.opset() < 14:
        return None
    scaled = _divided_by_six(graph, act)
    if scaled is not None:  # (y * relu6(y + 3)) / 6
        product = made.get(scaled)
        if product is None or product.domain or product.op_type != "Mul" or len(product.inputs) != 2:
            return None
        orders = [(product.inputs[k], product.inputs[1 - k], product) for k in (0, 1)]
    elif act.op_type == "Mul" and len(act.inputs) == 2:  # y * (relu6(y + 3) / 6)
        orders = []
        for k in (0, 1):
            sixth = made.get(act.inputs[1 - k])
            if sixth is not None and not sixth.domain:
                inner = _divided_by_six(graph, sixth)
                if inner is not None:
                    orders.append((act.inputs[k], inner, sixth))
    else:
        return None
    for y, clipped, between in orders:
        found = _relu6_of_plus_three(graph, made, clipped, y)
        conv = made.get(y)
        if found is None or conv is None or not _takes_activation(conv):
            continue
        add, clip = found
        multiplies = between if between.op_type == "Mul" and y in between.inputs else act
        chain = [conv, add, clip, between, act]
        if y in output_names(graph) or sorted(map(id, readers.get(y, []))) != sorted(
            (id(add), id(multiplies))
        ):
            continue
        if all(
            only_reader(graph, readers, node.outputs[0]) is chain[k + 2] for k, node in enumerate(chain[1:-1])
        ):
            return chain
    return None


def _divided_by_six(graph: Graph, node: Node) -> str | None:
    """What ``node`` divides by 6 (``Div(v, 6)``, ``Mul(v, 1/6)``), else None."""
    if node.domain or len(node.inputs) != 2:
        return None
    for k in (0, 1) if node.op_type == "Mul" else (0,) if node.op_type == "Div" else ():
        number = scalar(constant(graph, node.inputs[1 - k]))
        target = 1 / 6 if node.op_type == "Mul" else 6.0
        if number is not None and math.isclose(number, target, rel_tol=1e-6):
            return node.inputs[k]
    return None


def _relu6_of_plus_three(graph: Graph, made: dict[str, Node], name: str, y: str) -> tuple[Node, Node] | None:
    """The ``Add(y, 3)`` and ``Clip(., 0, 6)`` nodes that make ``name``, else None."""
    clip = made.get(name)
    if clip is None or clip.domain or clip.op_type != "Clip" or _params(graph, clip) != [0.0, 6.0]:
        return None
    add = made.get(clip.inputs[0])
    if add is None or add.domain or add.op_type != "Add" or len(add.inputs) != 2 or y not in add.inputs:
        return None
    three = scalar(constant(graph, add.inputs[1 - add.inputs.index(y)]))
    return (add, clip) if three == 3.0 else None


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
