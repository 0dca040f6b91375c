import pytest
from spawnml.errors import InvalidGraphError
from spawnml.ir import Graph, Node, Value


def chain(*nodes: Node, inputs=("x",), outputs=("y",)) -> Graph:
    return Graph(list(nodes), [Value(n) for n in inputs], [Value(n) for n in outputs], name="g")


def test_toposort_restores_dependency_order_and_keeps_file_order_otherwise():
    a = Node("Relu", ["x"], ["a"], name="a")
    b = Node("Relu", ["x"], ["b"], name="b")
    c = Node("Add", ["a", "b"], ["y"], name="c")
    assert [n.name for n in chain(c, b, a).toposort()] == ["b", "a", "c"]
    assert [n.name for n in chain(a, b, c).toposort()] == ["a", "b", "c"]


def test_cycle_is_refused_naming_nodes():
    graph = chain(
        Node("Relu", ["t"], ["s"], name="p"),
        Node("Relu", ["s"], ["t"], name="q"),
        Node("Add", ["x", "s"], ["y"]),
    )
    with pytest.raises(InvalidGraphError, match="cycle"):
        graph.toposort()


def test_dangling_input_is_refused():
    with pytest.raises(InvalidGraphError, match="'missing'"):
        chain(Node("Add", ["x", "missing"], ["y"], name="n")).toposort()


def test_value_produced_twice_is_refused():
    with pytest.raises(InvalidGraphError, match="produced by both"):
        chain(Node("Relu", ["x"], ["y"]), Node("Relu", ["x"], ["y"])).toposort()


def test_subgraph_reads_of_outer_names_order_the_outer_graph():
    body = Graph([Node("Relu", ["outer"], ["r"])], [], [Value("r")], name="body")
    uses = Node("If", ["x"], ["y"], {"then_branch": body, "else_branch": body}, name="if")
    makes = Node("Relu", ["x"], ["outer"], name="makes")
    graph = chain(uses, makes)
    assert body.free_names() == {"outer"}
    assert [n.name for n in graph.toposort()] == ["makes", "if"]
    assert [depth for _, depth in graph.walk()] == [0, 1, 1, 0]
