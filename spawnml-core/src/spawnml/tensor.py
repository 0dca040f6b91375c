# mypy: disable-error-code="empty-body"
# (``_Methods`` declares its methods with empty bodies: each is replaced by a dispatcher below.)
"""The tensor protocol: one tensor type for every device, exchanged through DLPack.

Sequences and optionals, the other kinds of ONNX value, live on a backend as a
:class:`TensorSequence` of its buffers and as the buffer itself or :data:`EMPTY_OPTIONAL`.
"""

from __future__ import annotations

import builtins
import math
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from . import dtypes
from .backend import Backend
from .errors import AutogradError, BackendUnavailableError, InvalidArgumentError


@dataclass(frozen=True)
class TensorSequence:
    """An ONNX sequence on one backend: its tensors' buffers in order, and their element type."""

    items: tuple[Any, ...]
    dtype: np.dtype | None  # None only where nothing declares it and there are no items

    def __len__(self) -> int:
        return len(self.items)


class EmptyOptional:
    """The value of an optional that holds nothing; an optional that holds a value is that value."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "EMPTY_OPTIONAL"


#: The one empty optional, returned to callers as ``None`` (as onnxruntime does).
EMPTY_OPTIONAL: Final = EmptyOptional()


class _Capturing(threading.local):
    """The recorder of the step being captured on this thread (``spawnml.autograd.capture``), told
    of the tensors made, written and read on the host while it records; None when nothing records."""

    recorder: Any = None


#: Per thread, as torch's grad mode: a capture on one thread does not see another's tensors.
capturing: Final = _Capturing()

_Dims = builtins.int | Sequence[builtins.int] | None


class _Methods:
    """Tensor's math methods and operators, as torch's. Each calls the function registered under
    its name in :data:`MATH` (``spawnml.autograd.methods.METHODS``); until autograd registers
    them, the binary operators answer ``NotImplemented`` and the rest raise ``TypeError``."""

    __slots__ = ()
    # Comparison operators make tensors unhashable by default; torch hashes tensors by identity.
    __hash__ = object.__hash__

    @property
    def T(self) -> Tensor: ...
    def __add__(self, other: Tensor | builtins.float) -> Tensor: ...
    def __radd__(self, other: Tensor | builtins.float) -> Tensor: ...
    def __sub__(self, other: Tensor | builtins.float) -> Tensor: ...
    def __rsub__(self, other: Tensor | builtins.float) -> Tensor: ...
    def __mul__(self, other: Tensor | builtins.float) -> Tensor: ...
    def __rmul__(self, other: Tensor | builtins.float) -> Tensor: ...
    def __truediv__(self, other: Tensor | builtins.float) -> Tensor: ...
    def __rtruediv__(self, other: Tensor | builtins.float) -> Tensor: ...
    def __pow__(self, exponent: Tensor | builtins.float) -> Tensor: ...
    def __rpow__(self, other: Tensor | builtins.float) -> Tensor: ...
    def __matmul__(self, other: Tensor) -> Tensor: ...
    def __rmatmul__(self, other: Tensor) -> Tensor: ...
    def __neg__(self) -> Tensor: ...
    def __abs__(self) -> Tensor: ...
    # Comparisons are elementwise and give a bool tensor, as in torch.
    def __eq__(self, other: object) -> Tensor: ...  # type: ignore[override]
    def __ne__(self, other: object) -> Tensor: ...  # type: ignore[override]
    def __lt__(self, other: Tensor | builtins.float) -> Tensor: ...
    def __le__(self, other: Tensor | builtins.float) -> Tensor: ...
    def __gt__(self, other: Tensor | builtins.float) -> Tensor: ...
    def __ge__(self, other: Tensor | builtins.float) -> Tensor: ...
    def __and__(self, other: Tensor | builtins.bool) -> Tensor: ...
    def __or__(self, other: Tensor | builtins.bool) -> Tensor: ...
    def __invert__(self) -> Tensor: ...
    def __iadd__(self, other: Tensor | builtins.float) -> Tensor: ...
    def __isub__(self, other: Tensor | builtins.float) -> Tensor: ...
    def __imul__(self, other: Tensor | builtins.float) -> Tensor: ...
    def __itruediv__(self, other: Tensor | builtins.float) -> Tensor: ...
    def __getitem__(self, key: Any) -> Tensor: ...
    def __setitem__(self, key: Any, value: Tensor | builtins.float) -> Tensor: ...
    def __len__(self) -> builtins.int: ...
    def __iter__(self) -> Iterator[Tensor]: ...
    def add(self, other: Tensor | builtins.float, *, alpha: builtins.float = 1) -> Tensor: ...
    def sub(self, other: Tensor | builtins.float, *, alpha: builtins.float = 1) -> Tensor: ...
    def mul(self, other: Tensor | builtins.float) -> Tensor: ...
    def div(self, other: Tensor | builtins.float) -> Tensor: ...
    def pow(self, exponent: Tensor | builtins.float) -> Tensor: ...
    def add_(self, other: Tensor | builtins.float, *, alpha: builtins.float = 1) -> Tensor: ...
    def sub_(self, other: Tensor | builtins.float, *, alpha: builtins.float = 1) -> Tensor: ...
    def mul_(self, other: Tensor | builtins.float) -> Tensor: ...
    def div_(self, other: Tensor | builtins.float) -> Tensor: ...
    def neg(self) -> Tensor: ...
    def exp(self) -> Tensor: ...
    def log(self) -> Tensor: ...
    def sqrt(self) -> Tensor: ...
    def abs(self) -> Tensor: ...
    def relu(self) -> Tensor: ...
    def sigmoid(self) -> Tensor: ...
    def tanh(self) -> Tensor: ...
    def sin(self) -> Tensor: ...
    def cos(self) -> Tensor: ...
    def erf(self) -> Tensor: ...
    def reciprocal(self) -> Tensor: ...
    def rsqrt(self) -> Tensor: ...
    def log1p(self) -> Tensor: ...
    def expm1(self) -> Tensor: ...
    def square(self) -> Tensor: ...
    def floor(self) -> Tensor: ...
    def ceil(self) -> Tensor: ...
    def round(self, *, decimals: builtins.int = 0) -> Tensor: ...
    def trunc(self) -> Tensor: ...
    def sign(self) -> Tensor: ...
    def eq(self, other: Tensor | builtins.float) -> Tensor: ...
    def ne(self, other: Tensor | builtins.float) -> Tensor: ...
    def lt(self, other: Tensor | builtins.float) -> Tensor: ...
    def le(self, other: Tensor | builtins.float) -> Tensor: ...
    def gt(self, other: Tensor | builtins.float) -> Tensor: ...
    def ge(self, other: Tensor | builtins.float) -> Tensor: ...
    def sum(self, dim: _Dims = None, keepdim: builtins.bool = False) -> Tensor: ...
    def mean(self, dim: _Dims = None, keepdim: builtins.bool = False) -> Tensor: ...
    # With an int ``dim``, ``max``/``min`` give autograd's (values, indices) named tuple.
    def max(self, dim: builtins.int | Tensor | None = None, keepdim: builtins.bool = False) -> Any: ...
    def min(self, dim: builtins.int | Tensor | None = None, keepdim: builtins.bool = False) -> Any: ...
    def amax(self, dim: _Dims = (), keepdim: builtins.bool = False) -> Tensor: ...
    def amin(self, dim: _Dims = (), keepdim: builtins.bool = False) -> Tensor: ...
    def argmax(self, dim: builtins.int | None = None, keepdim: builtins.bool = False) -> Tensor: ...
    def argmin(self, dim: builtins.int | None = None, keepdim: builtins.bool = False) -> Tensor: ...
    def maximum(self, other: Tensor | builtins.float) -> Tensor: ...
    def minimum(self, other: Tensor | builtins.float) -> Tensor: ...
    def clamp(
        self, min: Tensor | builtins.float | None = None, max: Tensor | builtins.float | None = None
    ) -> Tensor: ...
    def clip(
        self, min: Tensor | builtins.float | None = None, max: Tensor | builtins.float | None = None
    ) -> Tensor: ...
    def clamp_(
        self, min: Tensor | builtins.float | None = None, max: Tensor | builtins.float | None = None
    ) -> Tensor: ...
    def clip_(
        self, min: Tensor | builtins.float | None = None, max: Tensor | builtins.float | None = None
    ) -> Tensor: ...
    def isnan(self) -> Tensor: ...
    def var(
        self,
        dim: _Dims | builtins.bool = None,
        unbiased: builtins.bool | None = None,
        keepdim: builtins.bool = False,
        *,
        correction: builtins.float | None = None,
    ) -> Tensor: ...
    def std(
        self,
        dim: _Dims | builtins.bool = None,
        unbiased: builtins.bool | None = None,
        keepdim: builtins.bool = False,
        *,
        correction: builtins.float | None = None,
    ) -> Tensor: ...
    def logsumexp(self, dim: _Dims, keepdim: builtins.bool = False) -> Tensor: ...
    def norm(
        self,
        p: builtins.float | str | None = "fro",
        dim: _Dims = None,
        keepdim: builtins.bool = False,
        dtype: Any = None,
    ) -> Tensor: ...
    def softmax(
        self, dim: builtins.int | None = None, _stacklevel: builtins.int = 3, dtype: Any = None
    ) -> Tensor: ...
    def log_softmax(
        self, dim: builtins.int | None = None, _stacklevel: builtins.int = 3, dtype: Any = None
    ) -> Tensor: ...
    def gather(self, dim: builtins.int, index: Tensor) -> Tensor: ...
    def scatter(
        self,
        dim: builtins.int,
        index: Tensor,
        src: Tensor | builtins.float | None = None,
        *,
        value: builtins.float | None = None,
        reduce: str | None = None,
    ) -> Tensor: ...
    def scatter_(
        self,
        dim: builtins.int,
        index: Tensor,
        src: Tensor | builtins.float | None = None,
        *,
        value: builtins.float | None = None,
        reduce: str | None = None,
    ) -> Tensor: ...
    def scatter_add(self, dim: builtins.int, index: Tensor, src: Tensor) -> Tensor: ...
    def scatter_add_(self, dim: builtins.int, index: Tensor, src: Tensor) -> Tensor: ...
    def index_select(self, dim: builtins.int, index: Tensor) -> Tensor: ...
    def index_add(
        self, dim: builtins.int, index: Tensor, source: Tensor, *, alpha: builtins.float = 1
    ) -> Tensor: ...
    def index_add_(
        self, dim: builtins.int, index: Tensor, source: Tensor, *, alpha: builtins.float = 1
    ) -> Tensor: ...
    def masked_fill(self, mask: Tensor, value: Tensor | builtins.float) -> Tensor: ...
    def masked_fill_(self, mask: Tensor, value: Tensor | builtins.float) -> Tensor: ...
    def cumsum(self, dim: builtins.int, *, dtype: Any = None) -> Tensor: ...
    def narrow(self, dim: builtins.int, start: builtins.int, length: builtins.int) -> Tensor: ...
    def split(
        self, split_size_or_sections: builtins.int | Sequence[builtins.int], dim: builtins.int = 0
    ) -> tuple[Tensor, ...]: ...
    def chunk(self, chunks: builtins.int, dim: builtins.int = 0) -> tuple[Tensor, ...]: ...
    def unbind(self, dim: builtins.int = 0) -> tuple[Tensor, ...]: ...
    def matmul(self, other: Tensor) -> Tensor: ...
    def mm(self, mat2: Tensor) -> Tensor: ...
    def reshape(self, *shape: Any) -> Tensor: ...
    def view(self, *shape: Any) -> Tensor: ...
    def flatten(self, start_dim: builtins.int = 0, end_dim: builtins.int = -1) -> Tensor: ...
    def expand(self, *sizes: Any) -> Tensor: ...
    def permute(self, *dims: Any) -> Tensor: ...
    def transpose(self, dim0: builtins.int, dim1: builtins.int) -> Tensor: ...
    def t(self) -> Tensor: ...
    def squeeze(self, dim: builtins.int | Sequence[builtins.int] | None = None) -> Tensor: ...
    def unsqueeze(self, dim: builtins.int) -> Tensor: ...
    def float(self) -> Tensor: ...
    def double(self) -> Tensor: ...
    def half(self) -> Tensor: ...
    def long(self) -> Tensor: ...
    def int(self) -> Tensor: ...
    def bool(self) -> Tensor: ...
    def zero_(self) -> Tensor: ...
    def fill_(self, value: Any) -> Tensor: ...
    def copy_(self, source: Tensor) -> Tensor: ...


#: Tensor's math by method name, registered by ``spawnml.autograd`` when it loads: its functions
#: record the graph for backward, so they build on this module rather than live in it.
MATH: dict[str, Any] = {}

#: The operators Python retries otherwise on ``NotImplemented``: reflected, not in place, or
#: (``==`` and ``!=``) by identity, as tensors compared before autograd defined their math.
_BINARY = frozenset(
    f"__{prefix}{op}__"
    for op in ("add", "sub", "mul", "truediv", "pow", "matmul")
    for prefix in ("", "r", "i")
    if hasattr(_Methods, f"__{prefix}{op}__")
) | {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__and__", "__or__"}


def _dispatched(name: str) -> Any:
    """The method ``name`` of :class:`_Methods`: the function registered for it in :data:`MATH`."""

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        function = MATH.get(name)
        if function is not None:
            return function(self, *args, **kwargs)
        if name in _BINARY:
            return NotImplemented
        raise TypeError(f"Tensor.{name} is defined by spawnml.autograd, which is not imported")

    method.__name__ = method.__qualname__ = name
    return method


for _name, _declared in list(vars(_Methods).items()):
    if isinstance(_declared, property):
        setattr(_Methods, _name, property(_dispatched(_name)))
    elif callable(_declared) and _declared is not object.__hash__:
        setattr(_Methods, _name, _dispatched(_name))


class Tensor(_Methods):
    """A tensor living on a backend's device. Data moves to the host only on request.

    The same type records operations for autograd when it requires grad (``spawnml.autograd``);
    its math methods and operators follow torch's and are defined there.
    """

    __slots__ = (
        "__weakref__",
        "_backend",
        "_buffer",
        "_grad_accumulator",
        "_output_nr",
        "_requires_grad",
        "_version",
        "grad",
        "grad_fn",
    )

    def __init__(self, buffer: Any, backend: Backend, requires_grad: bool = False) -> None:
        self._buffer = buffer
        self._backend = backend
        self._requires_grad = False
        self._output_nr = 0
        self._version = 0
        self._grad_accumulator: Any = None
        self.grad: Tensor | None = None
        self.grad_fn: Any = None
        if requires_grad:
            self.requires_grad = True
        if capturing.recorder is not None:
            capturing.recorder.created(self)

    @classmethod
    def from_numpy(cls, array: Any, device: str = "cpu") -> Tensor:
        """Copy a host array (anything ``numpy.asarray`` takes) onto ``device``."""
        backend = backend_named(device)
        return cls(backend.from_numpy(np.asarray(array)), backend)

    @classmethod
    def from_dlpack(cls, obj: Any, device: str = "cpu") -> Tensor:
        """Take a DLPack-capable array (numpy, torch, cupy, ...) without a copy where possible."""
        backend = backend_named(device)
        return cls(backend.from_dlpack(obj), backend)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._backend.shape_of(self._buffer))

    @property
    def dtype(self) -> np.dtype:
        return self._backend.dtype_of(self._buffer)

    @property
    def device(self) -> str:
        return self._backend.name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return math.prod(self.shape)

    def size(self, dim: int | None = None) -> tuple[int, ...] | int:
        return self.shape if dim is None else self.shape[dim]

    @property
    def buffer(self) -> Any:
        """The backend's own buffer object."""
        return self._buffer

    @property
    def backend(self) -> Backend:
        return self._backend

    def numpy(self) -> np.ndarray:
        """Read the data back to the host as a numpy array."""
        if self._requires_grad:
            raise AutogradError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
            )
        return self._host()

    def item(self) -> Any:
        """The one element as a Python number."""
        if self.numel() != 1:
            raise InvalidArgumentError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        return self._host().reshape(()).item()

    def tolist(self) -> Any:
        return self._host().tolist()

    def _host(self) -> np.ndarray:
        """The data read back to the host (which a step being captured may refuse)."""
        if capturing.recorder is not None:
            capturing.recorder.host_read(self)
        return self._backend.to_numpy(self._buffer)

    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        """This tensor on another device and/or of another element type (itself when nothing changes);
        gradients flow back through the copy, as in torch."""
        from .autograd.functions.movement import to

        return to(self, *args, **kwargs)

    def cpu(self) -> Tensor:
        return self.to("cpu")

    # Autograd state.
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if self.grad_fn is not None:
            raise AutogradError(
                "you can only change requires_grad flags of leaf variables. If you want to use a computed "
                "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach()."
            )
        if value and self.dtype.kind not in "fc":
            raise AutogradError("only Tensors of floating point and complex dtype can require gradients")
        self._requires_grad = bool(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    def detach(self) -> Tensor:
        """The same data, cut from the graph: no ``grad_fn``, not requiring grad."""
        return Tensor(self._buffer, self._backend)

    def detach_(self) -> Tensor:
        self.grad_fn = None
        self._requires_grad = False
        return self

    @property
    def data(self) -> Tensor:
        return self.detach()

    @data.setter
    def data(self, value: Tensor) -> None:
        self._buffer, self._backend = value._buffer, value._backend
        if capturing.recorder is not None:
            capturing.recorder.rebound(self)

    def retain_grad(self) -> None:
        """Keep this non-leaf tensor's gradient in ``.grad`` on backward."""
        if self.grad_fn is None:
            if not self._requires_grad:
                raise AutogradError("can't retain_grad on Tensor that has requires_grad=False")
            return
        self.grad_fn.retained.setdefault(self._output_nr, []).append(self)

    @property
    def retains_grad(self) -> bool:
        keepers = getattr(self.grad_fn, "retained", {}).get(self._output_nr, [])
        return any(t is self for t in keepers)

    def backward(
        self, gradient: Tensor | None = None, retain_graph: bool | None = None, create_graph: bool = False
    ) -> None:
        """Accumulate this tensor's gradient into the leaves' ``.grad`` (``spawnml.autograd.backward``)."""
        from .autograd.engine import backward

        backward(self, gradient, retain_graph, create_graph)

    def _attach(self, grad_fn: Any, output_nr: int) -> None:
        """Make this tensor output ``output_nr`` of ``grad_fn`` (a recorded operation)."""
        self.grad_fn, self._output_nr, self._requires_grad = grad_fn, output_nr, True

    def _accumulator(self) -> Any:
        """The graph node that adds gradients into this leaf's ``.grad``."""
        if self._grad_accumulator is None:
            from .autograd.function import AccumulateGrad

            self._grad_accumulator = AccumulateGrad(self)
        return self._grad_accumulator

    def _snapshot(self) -> Tensor:
        """A new tensor object at this one's place in the graph, holding its current buffer."""
        twin = Tensor(self._buffer, self._backend)
        twin.grad_fn, twin._output_nr, twin._requires_grad = (
            self.grad_fn,
            self._output_nr,
            self._requires_grad,
        )
        twin._grad_accumulator = self._accumulator() if self.is_leaf and self._requires_grad else None
        return twin

    def _replace(self, value: Tensor, rebind: bool) -> Tensor:
        """An in-place update with ``value``: refuse leaves that require grad while recording, bump
        the version, and either write into the buffer (seen by every alias) or, while recording,
        take ``value``'s buffer so the old data stays intact for the backward pass."""
        from .autograd.mode import is_grad_enabled

        if self.is_leaf and self._requires_grad and is_grad_enabled():
            raise AutogradError("a leaf Variable that requires grad is being used in an in-place operation.")
        if tuple(value.shape) != tuple(self.shape):
            raise InvalidArgumentError(
                f"in-place result of shape {list(value.shape)} doesn't match the tensor's {list(self.shape)}"
            )
        if rebind:
            self._buffer = value._buffer
        else:
            self._backend.assign(self._buffer, value._buffer)
        if capturing.recorder is not None:
            capturing.recorder.replaced(self, value, rebind)
        self._version += 1
        if value.grad_fn is not None:
            self.grad_fn, self._output_nr, self._requires_grad = value.grad_fn, value._output_nr, True
        return self

    # Host and DLPack exchange.
    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        array = self._host()
        return array if dtype is None else array.astype(dtype, copy=False)

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self._backend.dlpack_source(self._buffer).__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._backend.dlpack_source(self._buffer).__dlpack_device__()

    def __repr__(self) -> str:
        extra = f", grad_fn=<{self.grad_fn.name()}>" if self.grad_fn is not None else ""
        extra = extra or (", requires_grad=True" if self._requires_grad else "")
        return f"Tensor(shape={self.shape}, dtype={dtypes.name(self.dtype)}, device={self.device!r}{extra})"


def backend_named(device: str) -> Backend:
    """The installed backend called ``device``."""
    from .discovery import backends

    installed = backends()
    if device not in installed:
        raise BackendUnavailableError(
            f"device {device!r} is not an installed backend (installed: {sorted(installed) or 'none'})"
        )
    return installed[device]
