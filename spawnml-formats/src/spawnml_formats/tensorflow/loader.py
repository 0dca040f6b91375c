"""The TensorFlow GraphDef loader: recognise a frozen graph, parse it bounded, lower it to the IR.

The protobuf classes come from ``tensorboard.compat.proto``: TensorBoard ships TensorFlow's
own ``.proto`` definitions (GraphDef, NodeDef, AttrValue, TensorProto, the function library),
kept in step with TensorFlow by its maintainers, and importing them needs neither TensorFlow
(a ~600 MB install whose import takes seconds) nor anything else heavy. tensorboardX ships a
smaller copy without the function library and the debug info, so it is not used.
"""

from __future__ import annotations

from typing import ClassVar

from spawnml import Limits, ModelLoadError
from spawnml.formats import FormatLoader, ModelSource
from spawnml.ir import Graph

from .sniff import looks_like_graphdef

#: SavedModel's first bytes: ``saved_model_schema_version`` (field 1, varint) then ``meta_graphs``.
SAVED_MODEL_HEAD = (0x08, 0x12)


class GraphDefLoader(FormatLoader):
    """Loads frozen TensorFlow ``GraphDef`` files (``.pb``) as bounded IR graphs."""

    name: ClassVar[str] = "tensorflow"
    extensions: ClassVar[tuple[str, ...]] = (".pb",)

    def sniff(self, head: bytes) -> bool:
        return looks_like_graphdef(head)

    def load(self, source: ModelSource, limits: Limits) -> Graph:
        from google.protobuf.message import DecodeError
        from tensorboard.compat.proto import graph_pb2

        from .lowering import lower_graph

        described = source.describe()
        data = source.read(limits)
        if len(data) > 2 and data[0] == SAVED_MODEL_HEAD[0] and data[2] == SAVED_MODEL_HEAD[1]:
            raise ModelLoadError(
                f"{described} looks like a SavedModel (saved_model.pb), not a frozen GraphDef; "
                "freeze a concrete function of it with convert_variables_to_constants_v2 and save "
                "the result's graph_def"
            )
        graph_def = graph_pb2.GraphDef()
        try:
            graph_def.ParseFromString(data)
        except (DecodeError, RuntimeError) as error:  # RuntimeError: nesting past protobuf's limit
            raise ModelLoadError(f"{described} is not a valid TensorFlow GraphDef: {error}") from error
        if not graph_def.node:
            raise ModelLoadError(f"{described} is not a TensorFlow GraphDef with nodes: it holds none")
        return lower_graph(graph_def, described, limits)
