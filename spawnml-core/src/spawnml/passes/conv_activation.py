"""Fuse a Conv and the activation after it into onnxruntime's ``com.microsoft`` FusedConv."""

from __future__ import annotations

import math

from ..ir import Graph, Node
from .context import MS_DOMAIN, PassContext, import_domain
from .graph_edit import constant, consumers, only_reader, producers, scalar

#: FusedConv's activations and their attributes, in ``activation_params`` order with defaults.
ACTIVATIONS: dict[str, tuple[tuple[str, float], ...]] = {
    "Relu": (),
    "Tanh": (),
    "Sigmoid": (),
    "LeakyRelu": (("alpha", 0.01),),
    "HardSigmoid": (("alpha", 0.2), ("beta", 0.5)),
    "Clip": (("min", -math.inf), ("max", math.inf)),
}


def fuse_conv_activation(graph: Graph, ctx: PassContext) -> int:
    """Replace Conv -> activation pairs by FusedConv where a provider runs it; return how many."""
    fused = 0
    made, readers = producers(graph), None
    for act in list(graph.nodes):
        if act.domain or act.op_type not in ACTIVATIONS:
            continue
        conv = made.get(act.inputs[0])
        if conv is None or conv.op_type != "Conv" or conv.domain:
            continue
        if readers is None:  # found once, at the first candidate
            readers = consumers(graph)
        if only_reader(graph, readers, conv.outputs[0]) is not act:
            continue
        params = _params(graph, act)
        if params is None:
            continue
        attrs = {**conv.attrs, "activation": act.op_type}
        if params:
            attrs["activation_params"] = params
        node = Node("FusedConv", list(conv.inputs), list(act.outputs), attrs, conv.name, MS_DOMAIN)
        if not ctx.may_replace(graph, [conv, act], node):
            continue
        import_domain(graph, MS_DOMAIN)
        graph.nodes[graph.nodes.index(conv)] = node
        graph.nodes.remove(act)
        fused += 1
    return fused


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
