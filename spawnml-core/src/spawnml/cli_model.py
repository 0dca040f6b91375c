"""The ``spawnml info`` and ``spawnml convert`` commands: describe a model file, write it as ONNX."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from . import dtypes
from .errors import InvalidArgumentError, SpawnMLError
from .formats import FormatLoader, ModelSource, detect, save_onnx
from .ir import Graph

#: Metadata values longer than this are cut in reports (tokenizer vocabularies run to megabytes).
MAX_METADATA_CHARS = 200
#: Tensors listed by the text report of a weights-only file.
TENSOR_ROWS = 20
#: Where the GGUF loader records the block type of a tensor it keeps quantized.
QUANT_TYPE_KEY = "gguf.quant_type."


def detect_format(path: str) -> FormatLoader:
    """The installed format loader that recognises the file at ``path``."""
    from .plugins import formats

    return detect(ModelSource.of(path), list(formats().values()))


# -- info ---------------------------------------------------------------------------------


def configure_info(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``spawnml info``."""
    parser.add_argument("model", help="path of the model file")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def model_report(path: str) -> dict[str, Any]:
    """What ``spawnml info --json`` prints for a model file."""
    from .formats import load

    loader = detect_format(path)
    graph = load(path)
    metadata, cut = capped_metadata(graph.metadata)
    report: dict[str, Any] = {
        "model": path,
        "format": loader.name,
        "graph": graph.name,
        "weights_only": not graph.nodes,
        "metadata": metadata,
        "metadata_cut": cut,
        "initializers": len(graph.initializers),
    }
    if not graph.nodes:
        tensors = [describe_tensor(graph, name) for name in graph.initializers]
        return report | {
            "parameters": sum(tensor["elements"] for tensor in tensors),
            "nodes": 0,
            "tensors": tensors,
        }
    return report | graph_report(graph)


def capped_metadata(metadata: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """``metadata`` with values over :data:`MAX_METADATA_CHARS` cut, and the keys that were cut."""
    capped, cut = {}, []
    for key, value in metadata.items():
        text = str(value)
        if len(text) > MAX_METADATA_CHARS:
            text = f"{text[:MAX_METADATA_CHARS]}... (cut from {len(text):,} chars)"
            cut.append(key)
        capped[key] = text
    return capped, cut


def describe_tensor(graph: Graph, name: str) -> dict[str, Any]:
    """Name, type, logical shape and element count of initializer ``name``."""
    array = graph.initializers[name]
    quant = graph.metadata.get(QUANT_TYPE_KEY + name)
    if quant is None:
        shape = list(array.shape)
        return {"name": name, "type": dtypes.name(array.dtype), "shape": shape, "elements": int(array.size)}
    shape = quantized_shape(quant, array)
    return {"name": name, "type": quant, "shape": shape, "elements": int(np.prod(shape, dtype=np.int64))}


def quantized_shape(quant: str, blocks: np.ndarray) -> list[int]:
    """The logical shape of GGML ``quant`` blocks held as ``uint8 [..., bytes per row]``."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    block_size, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType[quant]]
    return [*blocks.shape[:-1], blocks.shape[-1] // block_bytes * block_size]


def graph_report(graph: Graph) -> dict[str, Any]:
    """The opsets, inputs, outputs and operator support of a graph with nodes."""
    from .passes import infer_shapes

    try:
        types = infer_shapes(graph)
        inference_error = None
    except SpawnMLError as error:
        types, inference_error = {}, str(error)

    def describe(value: Any) -> dict[str, Any]:
        known = types.get(value.name)
        dtype = value.dtype if value.dtype is not None or known is None else known.dtype
        shape = value.shape if value.shape is not None or known is None else known.shape
        return {
            "name": value.name,
            "type": dtypes.type_string(dtype),
            "shape": None if shape is None else list(shape),
        }

    operators = operator_support(graph)
    initializer_names = set(graph.initializers)
    return {
        "opsets": {domain or "ai.onnx": version for domain, version in graph.opset_imports.items()},
        "inputs": [describe(v) for v in graph.inputs if v.name not in initializer_names],
        "outputs": [describe(v) for v in graph.outputs],
        "parameters": int(sum(array.size for array in graph.initializers.values())),
        "nodes": sum(op["count"] for op in operators),
        "operators": operators,
        "shape_inference_error": inference_error,
    }


def operator_support(graph: Graph) -> list[dict[str, Any]]:
    """Each operator of ``graph``, its count, and whether each installed backend runs all its nodes."""
    from .plugins import backends

    installed = backends()
    operators = []
    for (domain, op_type), count in sorted(graph.op_counts().items()):
        nodes = [
            (node, graph.opset(domain))
            for node, _ in graph.walk()
            if (node.domain, node.op_type) == (domain, op_type)
        ]
        runs = {
            name: all(backend.unsupported_reason(node, opset) is None for node, opset in nodes)
            for name, backend in installed.items()
        }
        operators.append(
            {"domain": domain or "ai.onnx", "op_type": op_type, "count": count, "backends": runs}
        )
    return operators


def run_info(args: argparse.Namespace) -> int:
    """``spawnml info``: the report as text or JSON; exit status 1 when shape inference fails,
    as a session would refuse the model at load."""
    report = model_report(args.model)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"Model: {report['model']} (graph {report['graph']!r})")
        print(f"Format: {report['format']}")
        if report["weights_only"]:
            print_weights(report)
        else:
            print_graph(report)
    if report.get("shape_inference_error"):
        print(f"spawnml: error: {report['shape_inference_error']}", file=sys.stderr)
        return 1
    return 0


def print_weights(report: dict[str, Any]) -> None:
    """The text report of a weights-only file: tensors and short metadata."""
    print(f"Weights only: {len(report['tensors'])} tensors, {report['parameters']:,} parameters")
    print("Tensors:")
    for tensor in report["tensors"][:TENSOR_ROWS]:
        print(f"  {tensor['name']:<40} {tensor['type']:<10} {format_shape(tensor['shape'])}")
    if len(report["tensors"]) > TENSOR_ROWS:
        print(f"  ... and {len(report['tensors']) - TENSOR_ROWS} more")
    short = {
        key: value
        for key, value in report["metadata"].items()
        if key not in report["metadata_cut"] and not key.startswith(QUANT_TYPE_KEY)
    }
    if short:
        print("Metadata:")
        for key, value in short.items():
            print(f"  {key}: {value}")
    if report["metadata_cut"]:
        print(f"  ({len(report['metadata_cut'])} long entries left out: {', '.join(report['metadata_cut'])})")


def print_graph(report: dict[str, Any]) -> None:
    """The text report of a graph: opsets, inputs, outputs, operator support."""
    print("Opsets: " + ", ".join(f"{domain} {version}" for domain, version in report["opsets"].items()))
    for key in ("inputs", "outputs"):
        print(f"{key.capitalize()}:")
        for value in report[key]:
            print(f"  {value['name']:<24} {value['type']:<18} {format_shape(value['shape'])}")
    print(f"Initializers: {report['initializers']} ({report['parameters']:,} elements)")
    if report["shape_inference_error"]:  # a session refuses the model: see run_info
        print(f"Shape inference failed: {report['shape_inference_error']}")
    names = sorted({name for op in report["operators"] for name in op["backends"]})
    print(f"Operators ({report['nodes']} nodes):")
    print(f"  {'operator':<34} {'count':>5}  " + "  ".join(f"{name:<7}" for name in names))
    for op in report["operators"]:
        marks = "  ".join(f"{'yes' if op['backends'][name] else 'NO':<7}" for name in names)
        print(f"  {op['domain'] + '::' + op['op_type']:<34} {op['count']:>5}  {marks}")


def format_shape(shape: list[int | str | None] | None) -> str:
    """A shape as ``[1, ?, 3]``, or ``?`` when unknown."""
    if shape is None:
        return "?"
    return "[" + ", ".join("?" if dim is None else str(dim) for dim in shape) + "]"


# -- convert ------------------------------------------------------------------------------


def configure_convert(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``spawnml convert``."""
    from .passes.optimizer import LEVEL_NAMES

    parser.add_argument("model", help="path of the model file (any format with a graph)")
    parser.add_argument("output", help="path of the .onnx file to write")
    parser.add_argument(
        "--optimization-level",
        choices=list(LEVEL_NAMES),
        default="disable",
        help="graph optimizations to apply before writing (default: disable)",
    )
    parser.add_argument(
        "--providers",
        default="cpu",
        help="backends that fold constants and run fused operators (default: cpu)",
    )


def convert(model: str, output: str, level: str = "disable", providers: list[str] | None = None) -> Graph:
    """Load ``model``, optimize it at ``level`` and write it to ``output`` as ONNX; the written graph."""
    from .formats import load
    from .passes.optimizer import optimize
    from .plugins import operators
    from .session import resolve_providers

    loader = detect_format(model)
    if not loader.has_graph:
        raise InvalidArgumentError(
            f"{model!r} is a {loader.name} file: weights only, with no graph to convert to ONNX"
        )
    graph = optimize(load(model), level, resolve_providers(providers), operators())
    save_onnx(graph, output)
    return graph


def run_convert(args: argparse.Namespace) -> int:
    """``spawnml convert``: write a model as ONNX."""
    graph = convert(args.model, args.output, args.optimization_level, args.providers.split(","))
    print(
        f"wrote {args.output}: {len(graph.nodes)} nodes, {len(graph.initializers)} initializers",
        file=sys.stderr,
    )
    return 0
