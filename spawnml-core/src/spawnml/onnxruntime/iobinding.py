"""``IOBinding``: inputs and outputs bound to devices ahead of a run, as onnxruntime has it.

Outputs bound to a device (or to no device) are left where they were computed, or moved
to the bound one; outputs bound to a preallocated OrtValue or host buffer are written into it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InvalidArgumentError
from ..tensor import Tensor
from .exceptions import InvalidArgument, UnsupportedFeatureError, error
from .exceptions import NotImplemented as OrtNotImplemented
from .ortvalue import HOST, OrtValue, device_backend, host_view, ort_value

if TYPE_CHECKING:
    from .options import RunOptions
    from .session import InferenceSession


class IOBinding:
    """Inputs and outputs of one session, bound by name."""

    def __init__(self, session: InferenceSession) -> None:
        self._session = session
        self._inputs: dict[str, Any] = {}
        # name -> a device backend (leave/move the output there) or an OrtValue to write into.
        self._outputs: dict[str, str | OrtValue] = {}
        self._results: list[OrtValue] = []

    # -- inputs -----------------------------------------------------------------------------
    def bind_cpu_input(self, name: str, arr_on_cpu: Any) -> None:
        self._inputs[name] = np.asarray(arr_on_cpu)

    def bind_input(
        self, name: str, device_type: str, device_id: int, element_type: Any, shape: Any, buffer_ptr: int
    ) -> None:
        """Bind raw memory; only host memory can be read from an address here."""
        self._inputs[name] = self._raw(device_type, element_type, shape, buffer_ptr).value

    def bind_ortvalue_input(self, name: str, ortvalue: OrtValue) -> None:
        self._inputs[name] = ortvalue.value

    def synchronize_inputs(self) -> None:
        """Nothing to wait for: SpawnML's uploads are ordered before the run."""

    def clear_binding_inputs(self) -> None:
        self._inputs.clear()

    # -- outputs ----------------------------------------------------------------------------
    def bind_output(
        self,
        name: str,
        device_type: str = "cpu",
        device_id: int = 0,
        element_type: Any = None,
        shape: Any = None,
        buffer_ptr: int | None = None,
    ) -> None:
        if buffer_ptr is None:
            self._outputs[name] = device_backend(device_type)
        else:
            self._outputs[name] = self._raw(device_type, element_type, shape, buffer_ptr)

    def bind_ortvalue_output(self, name: str, ortvalue: OrtValue) -> None:
        self._outputs[name] = ortvalue

    def synchronize_outputs(self) -> None:
        """Nothing to wait for: outputs are complete when the run returns."""

    def clear_binding_outputs(self) -> None:
        self._outputs.clear()
        self._results = []

    def get_outputs(self) -> list[OrtValue]:
        return list(self._results)

    def get_outputs_as_ortvaluevector(self) -> list[OrtValue]:
        return list(self._results)

    def copy_outputs_to_cpu(self) -> list[Any]:
        return [value.numpy() for value in self._results]

    # -- running ----------------------------------------------------------------------------
    def run(self, session: InferenceSession, run_options: RunOptions | None) -> None:
        """Run ``session`` on the bound inputs into the bound outputs."""
        if session is not self._session:
            raise error(InvalidArgumentError, InvalidArgument, "this IOBinding belongs to another session")
        names = list(self._outputs) or [arg.name for arg in session.get_outputs()]
        outputs = session.run_tensors(names, self._inputs, run_options)
        results = []
        for name, output in zip(names, outputs, strict=True):
            target = self._outputs.get(name, HOST)
            if isinstance(target, OrtValue):
                _write_into(target, output, name)
                results.append(target)
            elif isinstance(output, Tensor) and output.device != target:
                moved = output.numpy() if target == HOST else Tensor.from_numpy(output.numpy(), target)
                results.append(OrtValue(moved))
            else:
                results.append(ort_value(output))
        self._results = results

    @staticmethod
    def _raw(device_type: str, element_type: Any, shape: Any, buffer_ptr: int) -> OrtValue:
        if device_backend(device_type) != HOST:
            raise error(
                UnsupportedFeatureError,
                OrtNotImplemented,
                f"binding a raw {device_type!r} pointer is not supported; bind an OrtValue "
                "(OrtValue.ortvalue_from_numpy(..., device_type)) or a DLPack tensor instead",
            )
        return OrtValue(host_view(buffer_ptr, element_type, shape))


def _write_into(target: OrtValue, output: Any, name: str) -> None:
    """Copy a run's output into a preallocated value, as onnxruntime writes into bound memory."""
    if not isinstance(output, Tensor):
        raise error(InvalidArgumentError, InvalidArgument, f"output {name!r} is not a tensor")
    if target.is_tensor() and target.shape() != list(output.shape):
        raise error(
            InvalidArgumentError,
            InvalidArgument,
            f"output {name!r} has shape {list(output.shape)} but the bound value has {target.shape()}",
        )
    target.update_inplace(output.numpy())
