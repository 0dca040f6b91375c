"""A valid frozen TensorFlow GraphDef seed built from TensorBoard's copy of TensorFlow's messages.

Two branches: ``relu(x @ w + b)`` reshaped, and a 3x3 convolution with inference-mode batch
normalisation, ReLU6 and a spatial mean, so mutations reach the dense, NHWC and folding paths.
Every constant stores its bytes in ``tensor_content`` (no splats), so a mutated shape meets data
of the wrong length instead of a repeated value filling a huge tensor.
"""

from __future__ import annotations

import numpy as np
from tensorboard.compat.proto import graph_pb2, tensor_pb2, types_pb2

_TYPES = {np.dtype(np.float32): types_pb2.DT_FLOAT, np.dtype(np.int32): types_pb2.DT_INT32}


def add_node(graph: graph_pb2.GraphDef, name: str, op: str, inputs: tuple[str, ...] = (), **attrs) -> None:
    node = graph.node.add(name=name, op=op, input=list(inputs))
    for key, value in attrs.items():
        attr = node.attr[key]
        if isinstance(value, np.ndarray):
            tensor = tensor_pb2.TensorProto(dtype=_TYPES[value.dtype], tensor_content=value.tobytes())
            for dim in value.shape:
                tensor.tensor_shape.dim.add(size=dim)
            attr.tensor.CopyFrom(tensor)
        elif isinstance(value, bool):
            attr.b = value
        elif isinstance(value, float):
            attr.f = value
        elif isinstance(value, str):
            attr.s = value.encode()
        elif isinstance(value, list):
            attr.list.i.extend(value)
        elif isinstance(value, tuple):  # a placeholder shape
            for dim in value:
                attr.shape.dim.add(size=dim)
        else:
            attr.type = value


def graphdef_seed() -> bytes:
    rng = np.random.default_rng(0)
    graph = graph_pb2.GraphDef()
    f32, i32 = types_pb2.DT_FLOAT, types_pb2.DT_INT32
    add_node(graph, "x", "Placeholder", dtype=f32, shape=(-1, 4))
    add_node(graph, "w", "Const", dtype=f32, value=rng.standard_normal((4, 6)).astype(np.float32))
    add_node(graph, "b", "Const", dtype=f32, value=rng.standard_normal(6).astype(np.float32))
    add_node(graph, "shape", "Const", dtype=i32, value=np.array([-1, 2, 3], np.int32))
    add_node(graph, "dense", "MatMul", ("x", "w"), T=f32, transpose_a=False, transpose_b=False)
    add_node(graph, "biased", "BiasAdd", ("dense", "b"), T=f32, data_format="NHWC")
    add_node(graph, "relu", "Relu", ("biased",), T=f32)
    add_node(graph, "y", "Reshape", ("relu", "shape"), T=f32, Tshape=i32)
    add_node(graph, "image", "Placeholder", dtype=f32, shape=(1, 5, 5, 2))
    add_node(graph, "filter", "Const", dtype=f32, value=rng.standard_normal((3, 3, 2, 3)).astype(np.float32))
    for name in ("scale", "offset", "mean", "variance"):
        add_node(graph, name, "Const", dtype=f32, value=rng.uniform(0.5, 1.5, 3).astype(np.float32))
    add_node(graph, "axes", "Const", dtype=i32, value=np.array([1, 2], np.int32))
    add_node(graph, "conv", "Conv2D", ("image", "filter"), T=f32, strides=[1, 1, 1, 1], padding="SAME")
    norm_inputs = ("conv", "scale", "offset", "mean", "variance")
    add_node(graph, "norm", "FusedBatchNormV3", norm_inputs, T=f32, U=f32, epsilon=1e-3, is_training=False)
    add_node(graph, "relu6", "Relu6", ("norm",), T=f32)
    add_node(graph, "pooled", "Mean", ("relu6", "axes"), T=f32, Tidx=i32, keep_dims=False)
    return graph.SerializeToString()
