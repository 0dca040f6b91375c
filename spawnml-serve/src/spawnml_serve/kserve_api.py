"""The KServe / Triton v2 inference protocol (``/v2``), with Triton's binary tensor extension, so
that existing clients of those servers (``tritonclient.http`` among them) work unchanged."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import numpy as np
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .errors import RequestError
from .requests import field, parse_object, read_body
from .served import GraphModel
from .state import ServerState

#: The protocol's tensor data types and the numpy types they are.
DATATYPES = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
}
_NAMES = {dtype: name for name, dtype in DATATYPES.items()}
#: onnxruntime's element type names (what a session's inputs say) as the protocol's.
_FROM_TYPE_STRING = {
    "tensor(bool)": "BOOL",
    "tensor(uint8)": "UINT8",
    "tensor(uint16)": "UINT16",
    "tensor(uint32)": "UINT32",
    "tensor(uint64)": "UINT64",
    "tensor(int8)": "INT8",
    "tensor(int16)": "INT16",
    "tensor(int32)": "INT32",
    "tensor(int64)": "INT64",
    "tensor(float16)": "FP16",
    "tensor(float)": "FP32",
    "tensor(double)": "FP64",
}
HEADER_LENGTH = "Inference-Header-Content-Length"


@dataclass(frozen=True)
class GraphItem:
    """One infer request's work: its feeds, the outputs it wants, and its rows (first dimension)."""

    model: GraphModel
    feeds: dict[str, np.ndarray]
    outputs: tuple[str, ...]
    rows: int


def server_metadata(state: ServerState) -> JSONResponse:
    version = metadata.version("spawnml-serve")
    return JSONResponse({"name": "spawnml", "version": version, "extensions": ["binary_tensor_data"]})


def model_metadata(state: ServerState, name: str) -> JSONResponse:
    model = state.model(name, GraphModel)
    session = model.session
    return JSONResponse(
        {
            "name": name,
            "versions": ["1"],
            "platform": "spawnml",
            "inputs": [_describe(arg) for arg in session.get_inputs()],
            "outputs": [_describe(arg) for arg in session.get_outputs()],
        }
    )


def model_ready(state: ServerState, name: str) -> Response:
    state.model(name, GraphModel)
    return JSONResponse({"name": name, "ready": True})


async def infer(state: ServerState, request: Request, name: str) -> Response:
    model = state.model(name, GraphModel)
    header, binary = _split(request, await read_body(request, state.config.max_body_bytes))
    feeds = _feeds(model, field(header, "inputs", list), binary)
    wanted, binary_out = _requested(model, header)
    rows = {array.shape[0] if array.ndim else -1 for array in feeds.values()}
    async with state.admitted():
        if model.batchable and len(rows) == 1 and -1 not in rows:
            item = GraphItem(model, feeds, tuple(wanted), rows.pop())
            key = (name, item.outputs, tuple((k, v.shape[1:], v.dtype.str) for k, v in sorted(feeds.items())))
            results = await state.timed(state.graph_batcher.submit(key, item))
        else:
            results = await state.timed(run_in_threadpool(model.run, wanted, feeds))
    return _answer(name, header.get("id"), wanted, results, binary_out)


def run_graph_batch(items: list[GraphItem]) -> list[list[np.ndarray]]:
    """One run over the requests' feeds stacked on their first dimension, split back per request."""
    first = items[0]
    if len(items) == 1:
        return [first.model.run(list(first.outputs), first.feeds)]
    feeds = {name: np.concatenate([item.feeds[name] for item in items]) for name in first.feeds}
    outputs = first.model.run(list(first.outputs), feeds)
    total = sum(item.rows for item in items)
    for name, output in zip(first.outputs, outputs, strict=True):
        if output.ndim == 0 or output.shape[0] != total:
            raise RequestError(
                500, f"output {name!r} does not keep the inputs' first dimension; cannot batch"
            )
    bounds = np.cumsum([0, *(item.rows for item in items)])
    return [[output[start:stop] for output in outputs] for start, stop in itertools.pairwise(bounds)]


def _describe(arg: Any) -> dict[str, Any]:
    shape = [dim if isinstance(dim, int) else -1 for dim in arg.shape]
    return {"name": arg.name, "datatype": _FROM_TYPE_STRING.get(arg.type, arg.type), "shape": shape}


def _split(request: Request, body: bytes) -> tuple[dict[str, Any], bytes]:
    """The JSON header and the binary tensor data after it (Triton's binary extension)."""
    declared = request.headers.get(HEADER_LENGTH)
    if declared is None:
        return parse_object(body), b""
    if not declared.isdigit() or int(declared) > len(body):
        raise RequestError(400, f"{HEADER_LENGTH} {declared!r} does not fit the {len(body)}-byte body")
    cut = int(declared)
    return parse_object(body[:cut]), body[cut:]


def _feeds(model: GraphModel, inputs: list[Any], binary: bytes) -> dict[str, np.ndarray]:
    """The request's inputs as arrays, each checked against the model's declaration."""
    declared = {arg.name: arg for arg in model.session.get_inputs()}
    feeds: dict[str, np.ndarray] = {}
    offset = 0
    for index, tensor in enumerate(inputs):
        if not isinstance(tensor, dict):
            raise RequestError(400, f"inputs[{index}] must be an object")
        name = field(tensor, "name", str)
        if name not in declared:
            raise RequestError(
                400, f"model {model.name!r} has no input {name!r}; its inputs are {sorted(declared)}"
            )
        if name in feeds:
            raise RequestError(400, f"input {name!r} is given twice")
        datatype = field(tensor, "datatype", str)
        expected = _FROM_TYPE_STRING.get(declared[name].type)
        if datatype != expected:
            raise RequestError(400, f"input {name!r} is {expected}, not {datatype}")
        shape = field(tensor, "shape", list)
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise RequestError(
                400, f"input {name!r}: shape must be a list of whole numbers >= 0, not {shape}"
            )
        size = (field(tensor, "parameters", dict, {}) or {}).get("binary_data_size")
        if size is not None:
            data, offset = _binary(name, binary, offset, size, DATATYPES[datatype], shape)
        else:
            data = _from_json(name, field(tensor, "data", list), DATATYPES[datatype], shape)
        feeds[name] = data
    if offset != len(binary):
        raise RequestError(400, f"{len(binary) - offset} bytes of binary data follow the inputs unclaimed")
    return feeds


def _binary(
    name: str, binary: bytes, offset: int, size: Any, dtype: np.dtype, shape: list[int]
) -> tuple[np.ndarray, int]:
    elements = int(np.prod(shape))
    if not isinstance(size, int) or size != elements * dtype.itemsize or offset + size > len(binary):
        raise RequestError(
            400, f"input {name!r}: binary_data_size {size} does not hold {elements} {_NAMES[dtype]} elements"
        )
    array = np.frombuffer(binary, dtype.newbyteorder("<"), count=elements, offset=offset).reshape(shape)
    return array.astype(dtype), offset + size


def _from_json(name: str, data: list[Any], dtype: np.dtype, shape: list[int]) -> np.ndarray:
    try:
        array = np.asarray(data, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as error:
        raise RequestError(400, f"input {name!r}: data are not {_NAMES[dtype]} values: {error}") from None
    if array.size != int(np.prod(shape)):
        raise RequestError(400, f"input {name!r}: {array.size} values for shape {shape}")
    return array.reshape(shape)


def _requested(model: GraphModel, header: dict[str, Any]) -> tuple[list[str], set[str]]:
    """The outputs to return (all by default) and those to return as binary data."""
    names = [arg.name for arg in model.session.get_outputs()]
    every_binary = bool((field(header, "parameters", dict, {}) or {}).get("binary_data_output", False))
    requested = field(header, "outputs", list, None)
    if requested is None:
        return names, set(names) if every_binary else set()
    wanted, binary = [], set()
    for index, output in enumerate(requested):
        if not isinstance(output, dict):
            raise RequestError(400, f"outputs[{index}] must be an object")
        name = field(output, "name", str)
        if name not in names:
            raise RequestError(400, f"model {model.name!r} has no output {name!r}; its outputs are {names}")
        wanted.append(name)
        if (output.get("parameters") or {}).get("binary_data", every_binary):
            binary.add(name)
    return wanted, binary


def _answer(
    model: str, request_id: Any, names: list[str], results: list[np.ndarray], binary: set[str]
) -> Response:
    outputs, chunks = [], []
    for name, array in zip(names, results, strict=True):
        described: dict[str, Any] = {
            "name": name,
            "datatype": _NAMES.get(array.dtype),
            "shape": list(array.shape),
        }
        if described["datatype"] is None:
            raise RequestError(
                500, f"output {name!r} has element type {array.dtype}, which the protocol lacks"
            )
        if name in binary:
            data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
            described["parameters"] = {"binary_data_size": len(data)}
            chunks.append(data)
        else:
            described["data"] = array.reshape(-1).tolist()
        outputs.append(described)
    answer: dict[str, Any] = {"model_name": model, "model_version": "1", "outputs": outputs}
    if request_id is not None:
        answer["id"] = request_id
    if not chunks:
        return JSONResponse(answer)
    header = json.dumps(answer).encode()
    return Response(
        header + b"".join(chunks),
        media_type="application/octet-stream",
        headers={HEADER_LENGTH: str(len(header))},
    )
