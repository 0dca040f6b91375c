"""Hostile ONNX models: broken wiring, absurd sizes, and external data escaping the model's folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from spawnml import InvalidGraphError, ModelLimitError, ModelLoadError, UnsafeExternalDataError

from .corpus import Build, Hostile, outside

FLOAT = TensorProto.FLOAT


def model(
    nodes: list, inputs: list, outputs: list, initializers: list = (), opset: int = 17
) -> onnx.ModelProto:
    """A model of one graph, written without onnx's checker (hostile files would fail it)."""
    graph = helper.make_graph(nodes, "hostile", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def vector(name: str, size: int | str = 4) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, FLOAT, [size])


def saved(proto: onnx.ModelProto) -> Build:
    """A builder writing ``proto`` as ``model.onnx``."""

    def build(folder: Path) -> Path:
        path = folder / "model.onnx"
        path.write_bytes(proto.SerializeToString())
        return path

    return build


def raw_bytes(data: bytes) -> Build:
    def build(folder: Path) -> Path:
        path = folder / "model.onnx"
        path.write_bytes(data)
        return path

    return build


def cyclic() -> onnx.ModelProto:
    nodes = [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])]
    return model(nodes, [vector("x")], [vector("a")])


def dangling() -> onnx.ModelProto:
    return model([helper.make_node("Add", ["x", "nowhere"], ["y"])], [vector("x")], [vector("y")])


def produced_twice() -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])]
    return model(nodes, [vector("x")], [vector("y")])


def add_one_input() -> onnx.ModelProto:
    """A MatMul by a constant whose Add has one input: the MatMul+Add fusion would read a second."""
    weight = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m"], ["y"])]
    x = helper.make_tensor_value_info("x", FLOAT, [2, 4])
    return model(nodes, [x], [helper.make_tensor_value_info("y", FLOAT, [2, 4])], [weight])


def unproduced_output() -> onnx.ModelProto:
    return model([helper.make_node("Relu", ["x"], ["y"])], [vector("x")], [vector("never")])


def declared_initializer(dims: list[int]) -> onnx.ModelProto:
    """An initializer whose dims claim ``dims`` but which holds no data."""
    weight = TensorProto(name="w", data_type=FLOAT, dims=dims)
    return model([helper.make_node("Add", ["x", "w"], ["y"])], [vector("x")], [vector("y")], [weight])


def high_rank() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", FLOAT, [1] * 100)
    return model([helper.make_node("Relu", ["x"], ["y"])], [x], [vector("y")])


def long_string() -> onnx.ModelProto:
    node = helper.make_node("Relu", ["x"], ["y"], doc_string="")
    node.attribute.append(helper.make_attribute("payload", "x" * (2 << 20)))
    return model([node], [vector("x")], [vector("y")])


def nested_ifs(depth: int) -> onnx.ModelProto:
    """``depth`` If nodes each holding the next in its then-branch."""
    body = helper.make_graph([helper.make_node("Identity", ["x"], ["y0"])], "leaf", [], [vector("y0")])
    leaf = body
    for level in range(1, depth + 1):
        node = helper.make_node("If", ["c"], [f"y{level}"], then_branch=body, else_branch=leaf)
        body = helper.make_graph([node], f"level{level}", [], [vector(f"y{level}")])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    return model(list(body.node), [vector("x"), c], [vector(f"y{depth}")])


def external(location: str, offset: int = 0, length: int = 16) -> onnx.ModelProto:
    """A float[4] initializer whose data lies in ``location``."""
    weight = numpy_helper.from_array(np.zeros(4, np.float32), "w")
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    for key, value in {"location": location, "offset": str(offset), "length": str(length)}.items():
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    return model([helper.make_node("Add", ["x", "w"], ["y"])], [vector("x")], [vector("y")], [weight])


def secret(folder: Path) -> Path:
    """A 16-byte file outside the model's folder."""
    path = outside(folder) / "secret.bin"
    path.write_bytes(bytes(16))
    return path


def escaping_dotdot(folder: Path) -> Path:
    secret(folder)
    return saved(external("../outside/secret.bin"))(folder)


def escaping_absolute(folder: Path) -> Path:
    return saved(external(str(secret(folder))))(folder)


def escaping_symlink(folder: Path) -> Path:
    (folder / "weights.bin").symlink_to(secret(folder))
    return saved(external("weights.bin"))(folder)


def escaping_linked_folder(folder: Path) -> Path:
    secret(folder)
    (folder / "data").symlink_to(outside(folder), target_is_directory=True)
    return saved(external("data/secret.bin"))(folder)


def device_file(folder: Path) -> Path:
    (folder / "zeros.bin").symlink_to("/dev/zero")
    return saved(external("zeros.bin"))(folder)


def lying_range(offset: int, length: int) -> Build:
    def build(folder: Path) -> Path:
        (folder / "weights.bin").write_bytes(bytes(16))
        return saved(external("weights.bin", offset, length))(folder)

    return build


def folder_as_data(folder: Path) -> Path:
    (folder / "weights").mkdir()
    return saved(external("weights"))(folder)


def not_utf8(proto: onnx.ModelProto, marker: str) -> Build:
    """A builder of ``proto`` with every ``marker`` string made invalid UTF-8 (onnx cannot write that)."""
    data = proto.SerializeToString()
    assert marker.encode() in data
    return raw_bytes(data.replace(marker.encode(), b"\xff" + marker.encode()[1:]))


def external_not_utf8(folder: Path) -> Path:
    (folder / "weights.bin").write_bytes(bytes(16))
    return not_utf8(external("weights.bin"), "weights.bin")(folder)


HOSTILE = [
    Hostile("onnx-cycle", saved(cyclic()), InvalidGraphError),
    Hostile("onnx-dangling-name", saved(dangling()), InvalidGraphError),
    Hostile("onnx-produced-twice", saved(produced_twice()), InvalidGraphError),
    Hostile("onnx-unproduced-output", saved(unproduced_output()), InvalidGraphError),
    Hostile("onnx-add-one-input", saved(add_one_input()), InvalidGraphError),
    Hostile("onnx-absurd-dims", saved(declared_initializer([1 << 40, 1 << 40])), ModelLimitError),
    Hostile("onnx-overflowing-dims", saved(declared_initializer([1 << 62, 1 << 62, 16])), ModelLimitError),
    Hostile("onnx-negative-dim", saved(declared_initializer([-4, 4])), ModelLimitError),
    Hostile("onnx-data-shorter-than-dims", saved(declared_initializer([4, 4])), ModelLoadError),
    Hostile("onnx-rank-100", saved(high_rank()), ModelLimitError),
    Hostile("onnx-2mib-string-attribute", saved(long_string()), ModelLimitError),
    Hostile("onnx-subgraphs-20-deep", saved(nested_ifs(20)), ModelLimitError),
    Hostile("onnx-not-protobuf", raw_bytes(b"\x08\x07\x12" + b"\xff" * 64), ModelLoadError),
    Hostile("onnx-truncated", raw_bytes(cyclic().SerializeToString()[:-7]), ModelLoadError),
    Hostile("onnx-external-dotdot", escaping_dotdot, UnsafeExternalDataError),
    Hostile("onnx-external-absolute", escaping_absolute, UnsafeExternalDataError),
    Hostile("onnx-external-symlink", escaping_symlink, UnsafeExternalDataError),
    Hostile("onnx-external-symlinked-folder", escaping_linked_folder, UnsafeExternalDataError),
    Hostile("onnx-external-dev-zero", device_file, UnsafeExternalDataError),
    Hostile("onnx-external-past-the-end", lying_range(8, 16), ModelLoadError),
    Hostile("onnx-external-huge-offset", lying_range(1 << 62, 16), ModelLoadError),
    Hostile("onnx-external-wrong-length", lying_range(0, 1 << 40), ModelLoadError),
    Hostile("onnx-external-folder", folder_as_data, ModelLoadError),
    Hostile(
        "onnx-node-domain-not-utf8",
        not_utf8(
            model([helper.make_node("Relu", ["x"], ["y"], domain="vendor")], [vector("x")], [vector("y")]),
            "vendor",
        ),
        ModelLoadError,
    ),
    Hostile(
        "onnx-value-name-not-utf8",
        not_utf8(
            model([helper.make_node("Relu", ["xname"], ["y"])], [vector("xname")], [vector("y")]), "xname"
        ),
        ModelLoadError,
    ),
    Hostile("onnx-external-location-not-utf8", external_not_utf8, ModelLoadError),
]
