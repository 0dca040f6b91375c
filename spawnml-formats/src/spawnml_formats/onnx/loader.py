"""The ONNX format loader: parse a ``ModelProto`` and lower it to the IR."""

from __future__ import annotations

import os
from typing import ClassVar

from google.protobuf.message import DecodeError
from spawnml import Limits, ModelLoadError
from spawnml.formats import FormatLoader, ModelSource
from spawnml.ir import Graph
from spawnml.ops.registry import OperatorRegistry

from .lowering import lower_model
from .proto import ModelProto
from .sniff import looks_like_onnx


class ONNXLoader(FormatLoader):
    """Loads ``.onnx`` files, external data included, as bounded IR graphs."""

    name: ClassVar[str] = "onnx"
    extensions: ClassVar[tuple[str, ...]] = (".onnx",)

    def sniff(self, head: bytes) -> bool:
        return looks_like_onnx(head)

    def load(self, source: ModelSource, limits: Limits) -> Graph:
        model = parse_model(source.read(limits), source.describe())
        return lower_model(model, limits, source.folder)

    writes: ClassVar[bool] = True

    def save(self, graph: Graph, path: str | os.PathLike[str], operators: OperatorRegistry) -> None:
        from .writer import save_model  # imports onnx, which reading does without (see .proto)

        save_model(graph, path, operators)


def parse_model(data: bytes, described: str) -> ModelProto:
    """The ``ModelProto`` in ``data``, with model-local functions inlined into the graph.

    onnx reads no external data here; the lowering does, from inside the model's folder. The
    parse is ``onnx.load_model_from_string``'s, on the messages of :mod:`.proto`: a model without
    local functions is read without importing onnx.
    """
    model = ModelProto()
    try:
        consumed = model.ParseFromString(data)
    except DecodeError as error:
        raise ModelLoadError(f"{described} is not a valid ONNX model: {error}") from error
    if consumed is not None and consumed != len(data):
        raise ModelLoadError(
            f"{described} is not a valid ONNX model: Protobuf decoding consumed too few bytes: "
            f"{consumed} out of {len(data)}"
        )
    if not model.HasField("graph"):
        raise ModelLoadError(f"{described} is not a valid ONNX model: it has no graph")
    if model.functions:
        from onnx.inliner import inline_local_functions

        try:
            model = inline_local_functions(model)
        except Exception as error:  # the inliner reports bad functions with various types
            raise ModelLoadError(f"{described}: its local functions cannot be inlined: {error}") from error
    return model
