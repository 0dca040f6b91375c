"""Valid seed files of every format, built by code, for the mutation fuzzers to start from."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import safetensors.numpy
from gguf import GGUFWriter
from onnx import TensorProto, helper, numpy_helper

from tests.fuzz.coreml_files import ml_program_model, neural_network_model
from tests.fuzz.graphdef_files import graphdef_seed
from tests.hostile.container_files import tflite_model
from tests.hostile.torch_files import archive, legacy, state_dict, tensor


def onnx_seed() -> bytes:
    """``relu(x @ w + b)`` reshaped, with a Where on a comparison: several operators and initializers."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2, 3])
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Greater", ["r", "b"], ["mask"]),
        helper.make_node("Where", ["mask", "r", "h"], ["m"]),
        helper.make_node("Reshape", ["m", "shape"], ["y"]),
    ]
    initializers = [
        numpy_helper.from_array(rng.standard_normal((4, 6)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b"),
        numpy_helper.from_array(np.array([-1, 2, 3], np.int64), "shape"),
    ]
    graph = helper.make_graph(nodes, "seed", [x], [y], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def gguf_seed() -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "seed.gguf"
        writer = GGUFWriter(path, "llama")
        writer.add_name("seed")
        writer.add_uint32("seed.count", 7)
        writer.add_array("seed.list", [1, 2, 3])
        writer.add_tensor("w", np.arange(32, dtype=np.float32).reshape(4, 8))
        writer.add_tensor("h", np.ones(16, dtype=np.float16))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        return path.read_bytes()


def safetensors_seed() -> bytes:
    tensors = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(5, dtype=np.int64)}
    return safetensors.numpy.save(tensors, metadata={"format": "np"})


def torch_zip_seed() -> bytes:
    return archive(state_dict(tensor()))


def torch_legacy_seed() -> bytes:
    return legacy(state_dict(tensor()))


SEEDS: dict[str, Callable[[], bytes]] = {
    "onnx": onnx_seed,
    "gguf": gguf_seed,
    "safetensors": safetensors_seed,
    "tflite": tflite_model,
    "torch-zip": torch_zip_seed,
    "torch-legacy": torch_legacy_seed,
    "tensorflow": graphdef_seed,
    "coreml-nn": neural_network_model,
    "coreml-mlprogram": ml_program_model,
}
