"""Every error SpawnML raises on purpose, in one hierarchy under :class:`SpawnMLError`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


class SpawnMLError(Exception):
    """Base of every error SpawnML raises on purpose."""


class ModelLoadError(SpawnMLError):
    """A model file could not be read or is not a valid model of its format."""


class UnknownFormatError(ModelLoadError):
    """No installed format plugin recognises the file."""


class ModelLimitError(ModelLoadError):
    """A model exceeds one of the configured :class:`spawnml.Limits`."""

    def __init__(self, what: str, value: int, limit: int, where: str = "") -> None:
        self.what, self.value, self.limit, self.where = what, value, limit, where
        place = f" in {where}" if where else ""
        super().__init__(
            f"{what}{place} is {value:,}, above the limit of {limit:,} "
            f"(raise it with spawnml.Limits({_limit_field(what)}=...) if the file is trusted)"
        )


def _limit_field(what: str) -> str:
    fields = {
        "file size": "max_file_bytes",
        "node count": "max_nodes",
        "rank": "max_rank",
        "tensor elements": "max_tensor_elements",
        "total elements": "max_total_elements",
        "string length": "max_string_length",
        "subgraph depth": "max_subgraph_depth",
        "loop iterations": "max_loop_iterations",
    }
    return fields.get(what, "...")


class InvalidGraphError(ModelLoadError):
    """The graph is malformed: cycles, dangling names, duplicate outputs."""


class ShapeInferenceError(InvalidGraphError):
    """A node's schema refuses what it is given (its input types, attributes or constants): the
    model is invalid for that operator, so a session refuses it at load rather than run it."""

    def __init__(self, node: str, op_type: str, domain: str, reason: str) -> None:
        self.node, self.op_type, self.domain, self.reason = node, op_type, domain, reason
        super().__init__(
            f"shape inference failed at node {node!r} ({domain or 'ai.onnx'}::{op_type}): {reason}"
        )


class UnsafeExternalDataError(ModelLoadError):
    """External tensor data points outside the model's folder."""


@dataclass(frozen=True)
class UnsupportedOperator:
    """One operator no chosen provider runs, with how often the graph uses it."""

    domain: str
    op_type: str
    opset: int
    count: int
    reasons: tuple[str, ...] = ()

    def describe(self) -> str:
        domain = self.domain or "ai.onnx"
        text = f"{domain}::{self.op_type} (opset {self.opset}, {self.count} node{'s' * (self.count != 1)})"
        if self.reasons:
            text += ": " + "; ".join(self.reasons)
        return text


class UnsupportedOperatorError(SpawnMLError):
    """The graph uses operators that none of the chosen providers runs."""

    def __init__(self, operators: Sequence[UnsupportedOperator], providers: Iterable[str]) -> None:
        self.operators = tuple(operators)
        self.providers = tuple(providers)
        lines = "\n".join("  " + op.describe() for op in self.operators)
        super().__init__(
            f"{len(self.operators)} operator(s) not supported by providers {list(self.providers)}:\n{lines}"
        )


class InvalidFeedError(SpawnMLError):
    """A feed passed to ``run`` has the wrong name, dtype or shape."""


class InvalidArgumentError(SpawnMLError):
    """An argument to a SpawnML API is not valid."""


class BackendUnavailableError(SpawnMLError):
    """A provider was asked for that is not installed or has no device."""


class ExecutionError(SpawnMLError):
    """A kernel failed while running; names the node, operator and provider."""

    def __init__(self, node_name: str, op_type: str, provider: str, cause: BaseException) -> None:
        self.node_name, self.op_type, self.provider = node_name, op_type, provider
        super().__init__(
            f"node {node_name!r} ({op_type}) failed on provider {provider!r}: {type(cause).__name__}: {cause}"
        )


class DeviceError(SpawnMLError):
    """A device failed to give memory or was lost; names the tensor and, once known, where."""

    def __init__(self, message: str, where: str = "") -> None:
        self.detail, self.where = message, where
        super().__init__(f"{where}: {message}" if where else message)

    def at(self, where: str) -> DeviceError:
        """This error, told the place it happened (a node, an input) unless it already knows one."""
        if not self.where:
            self.where = where
            self.args = (f"{where}: {self.detail}",)
        return self


class DeviceMemoryError(DeviceError):
    """A device allocation failed: the device is out of memory, or the tensor is past its limits."""


class DeviceLostError(DeviceError):
    """The device was lost (reset, removed or destroyed); nothing more runs on it."""


class PluginError(SpawnMLError):
    """A plugin failed to load or registered something invalid."""


class AutogradError(SpawnMLError, RuntimeError):
    """Autograd was used where PyTorch raises ``RuntimeError`` (a freed graph, an in-place
    update of a leaf that requires grad, a gradient of the wrong shape); catchable as either."""
