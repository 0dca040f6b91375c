"""The graph builder every lowering and model port writes graphs through."""

from __future__ import annotations

import numpy as np
from spawnml.graph_builder import GraphBuilder
from spawnml.ir import Graph


def test_names_are_unique_and_reserved_names_are_only_claimed():
    b = GraphBuilder(Graph(name="g"), reserved=["conv"])
    assert [b.fresh("x"), b.fresh("x"), b.fresh("")] == ["x", "x_1", "t"]
    assert b.fresh("conv") == "conv_1"
    assert b.claim("conv") == "conv"
    assert b.claim("conv") == "conv_2"


def test_nodes_initializers_and_renaming_the_last_output():
    b = GraphBuilder(Graph(name="g"))
    scale = b.initializer(np.float32(2), "scale")
    assert b.graph.initializers[scale].shape == ()  # a scalar stays 0-d
    y = b.emit("Mul", ["x", scale])
    assert y == "x_mul" and b.wrote_last(y)
    assert b.rename_last(b.claim("y")) == "y"
    node = b.graph.nodes[-1]
    assert (node.op_type, node.inputs, node.outputs, node.name) == ("Mul", ["x", "scale"], ["y"], "y")
    b.add_node("Split", ["y"], ["a", "b"], {"axis": 0}, domain="custom")
    assert not b.wrote_last("a")
    assert b.graph.nodes[-1].name == "a" and b.graph.nodes[-1].domain == "custom"


def test_rollback_undoes_nodes_initializers_and_names():
    b = GraphBuilder(Graph(name="g"))
    b.emit("Relu", ["x"])
    mark = b.checkpoint()
    shift = b.ints([1, 2], "shift")
    y = b.emit("Add", ["x_relu", shift])
    assert b.rollback(mark) == {shift, y}
    assert [node.op_type for node in b.graph.nodes] == ["Relu"]
    assert shift not in b.graph.initializers
    assert b.fresh("shift") == "shift"  # the name is free again


def test_a_subclass_names_outputs_its_own_way():
    class Numbered(GraphBuilder):
        def output_base(self, op_type: str, inputs: list[str]) -> str:
            return op_type.lower()

    b = Numbered(Graph(name="g"))
    assert [b.emit("Relu", ["x"]), b.emit("Relu", ["x"])] == ["relu", "relu_1"]
