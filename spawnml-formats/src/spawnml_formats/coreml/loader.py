"""The Core ML format loader: recognise a model file or package, parse it bounded, lower it to the IR."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from google.protobuf.message import DecodeError
from spawnml import Limits, ModelLoadError
from spawnml.formats import FormatLoader, ModelSource
from spawnml.ir import Graph

from .blobs import BlobFiles
from .package import open_package
from .protos import proto
from .sniff import looks_like_coreml, looks_like_package

#: Model kinds with a lowering; the others (tree ensembles, pipelines, ...) are refused by name.
GRAPH_KINDS = ("neuralNetwork", "neuralNetworkRegressor", "mlProgram")


class CoreMLLoader(FormatLoader):
    """Loads ``.mlmodel`` files (neural networks, ML programs) and ``.mlpackage`` folders."""

    name: ClassVar[str] = "coreml"
    extensions: ClassVar[tuple[str, ...]] = (".mlmodel", ".mlpackage")

    def sniff(self, head: bytes) -> bool:
        return looks_like_coreml(head)

    def sniff_folder(self, folder: Path) -> bool:
        return looks_like_package(folder)

    def load(self, source: ModelSource, limits: Limits) -> Graph:
        model_folder: Path | None
        if source.is_folder and source.path is not None:  # a folder always has its path
            package = open_package(source.path, limits)
            data, model_folder, described = package.model, package.model_folder, package.described
        else:
            data, model_folder, described = source.read(limits), source.folder, source.describe()
        model = parse_model(data, described)
        return lower_model(model, BlobFiles(model_folder, limits, described), limits, described)


def parse_model(data: bytes, described: str) -> Any:
    """The ``CoreML.Specification.Model`` message in ``data``."""
    model = proto("Model_pb2").Model()
    try:
        model.ParseFromString(data)
    except (DecodeError, RecursionError) as error:
        raise ModelLoadError(f"{described} is not a valid Core ML model: {error}") from error
    if model.specificationVersion < 1:
        raise ModelLoadError(f"{described} is not a valid Core ML model: no specification version")
    return model


def lower_model(model: Any, blobs: BlobFiles, limits: Limits, described: str) -> Graph:
    """The IR graph of a neural network or an ML program."""
    from .mil import lower_program
    from .neuralnetwork import lower_network

    kind = model.WhichOneof("Type")
    if kind not in GRAPH_KINDS:
        raise ModelLoadError(
            f"{described} is a Core ML {kind or 'model of no kind'}; SpawnML reads neural networks "
            f"and ML programs ({', '.join(GRAPH_KINDS)})"
        )
    if kind != "mlProgram":
        graph = lower_network(model, limits, described)
    else:
        graph = lower_program(model, blobs, limits, described)
    graph.metadata.update(_metadata(model, kind))
    return graph


def _metadata(model: Any, kind: str) -> dict[str, str]:
    meta = model.description.metadata
    entries = {
        "format": "coreml",
        "coreml_model_type": kind,
        "coreml_specification_version": str(model.specificationVersion),
        "description": meta.shortDescription,
        "author": meta.author,
        "license": meta.license,
        "version": meta.versionString,
    }
    entries.update(meta.userDefined)
    return {key: value for key, value in entries.items() if value}
