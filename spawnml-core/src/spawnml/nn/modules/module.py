"""``Parameter`` and ``Module``, the base of every layer, as in ``torch.nn``.

A module's attributes that are parameters, buffers or submodules are registered by name as
they are set; everything that walks a model (``named_parameters``, ``state_dict``, ``to``,
``train``) follows that registry, in the order the attributes were set.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np

from ...autograd.mode import no_grad
from ...errors import InvalidArgumentError
from ...tensor import Tensor, capturing


class Parameter(Tensor):
    """A tensor that is a module's learnable weight: it requires grad unless told otherwise."""

    __slots__ = ()

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        if data is None:
            from ...autograd.functions.creation import empty

            data = empty(0)
        super().__init__(data.buffer, data.backend, requires_grad=requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


class IncompatibleKeys(NamedTuple):
    missing_keys: list[str]
    unexpected_keys: list[str]


class Module:
    """Base class of layers and models: subclasses set parameters and submodules as attributes
    in ``__init__`` and define ``forward``; calling the module runs ``forward``."""

    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if capturing.recorder is not None:  # a captured step is valid for this mode only
            capturing.recorder.module(self)
        return self.forward(*args, **kwargs)

    # Registration.
    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise InvalidArgumentError("cannot assign attributes before Module.__init__() call")
        if isinstance(value, Parameter):
            self._unregister(name)
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            self._unregister(name)
            self.add_module(name, value)
        elif name in self._buffers:
            self.register_buffer(name, value, persistent=name not in self._non_persistent)
        elif name in self._parameters:
            self.register_parameter(name, value)
        elif name in self._modules:
            self.add_module(name, value)
        else:
            object.__setattr__(self, name, value)

    def _unregister(self, name: str) -> None:
        for table in (self._parameters, self._buffers, self._modules):
            table.pop(name, None)
        self._non_persistent.discard(name)

    def __getattr__(self, name: str) -> Any:
        for table in ("_parameters", "_buffers", "_modules"):
            entries = self.__dict__.get(table)
            if entries is not None and name in entries:
                return entries[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                self._non_persistent.discard(name)
                return
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add ``param`` (or ``None``, an absent optional weight such as a bias) under ``name``."""
        if param is not None and not isinstance(param, Parameter):
            raise InvalidArgumentError(
                f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                "(Parameter or None required)"
            )
        self.__dict__.pop(name, None)
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a tensor that is state but not a parameter (running statistics); ``persistent``
        buffers are part of the ``state_dict``."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise InvalidArgumentError(
                f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (Tensor or None required)"
            )
        self.__dict__.pop(name, None)
        self._buffers[name] = tensor
        (self._non_persistent.discard if persistent else self._non_persistent.add)(name)

    def add_module(self, name: str, module: Module | None) -> None:
        if module is not None and not isinstance(module, Module):
            raise InvalidArgumentError(f"{type(module).__name__} is not a Module subclass")
        self.__dict__.pop(name, None)
        self._modules[name] = module

    register_module = add_module

    # Walking the tree.
    def named_modules(self, memo: set[int] | None = None, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """This module and every submodule, each once, with dotted names."""
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(memo, f"{prefix}.{name}" if prefix else name)

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen: set[int] = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator[Module]:
        for _, module in self.named_children():
            yield module

    def _named_members(self, table: str, prefix: str, recurse: bool) -> Iterator[tuple[str, Tensor]]:
        seen: set[int] = set()
        modules = self.named_modules(prefix=prefix) if recurse else iter([(prefix, self)])
        for module_prefix, module in modules:
            for name, value in getattr(module, table).items():
                if value is None or id(value) in seen:
                    continue
                seen.add(id(value))
                yield (f"{module_prefix}.{name}" if module_prefix else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        yield from self._named_members("_parameters", prefix, recurse)  # type: ignore[misc]

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        yield from self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call ``fn`` on every submodule (children first) and then on this module."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # Modes and gradients.
    def train(self, mode: bool = True) -> Module:
        if not isinstance(mode, bool):
            raise InvalidArgumentError("training mode is expected to be boolean")
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for param in self.parameters():
            if param.grad is not None:
                with no_grad():
                    param.grad = None if set_to_none else param.grad.detach().zero_()

    # Devices and types.
    def to(self, *args: Any, **kwargs: Any) -> Module:
        """Move every parameter and buffer to a device and/or floating type, in place, as
        ``Tensor.to`` takes them; integer buffers keep their type."""

        def convert(t: Tensor) -> Tensor:
            if t.dtype.kind in "fc":
                return t.detach().to(*args, **kwargs)
            devices = [a for a in (*args, kwargs.get("device")) if isinstance(a, str)]
            return t.detach().to(devices[-1]) if devices else t

        for module in self.modules():
            for param in module._parameters.values():
                if param is not None:
                    param.data = convert(param)
                    if param.grad is not None:
                        param.grad = convert(param.grad)
            for name, buffer in module._buffers.items():
                if buffer is not None:
                    module._buffers[name] = convert(buffer)
        return self

    def cpu(self) -> Module:
        return self.to("cpu")

    def float(self) -> Module:
        return self.to(np.float32)

    def double(self) -> Module:
        return self.to(np.float64)

    # State.
    def state_dict(self, prefix: str = "", keep_vars: bool = False) -> OrderedDict[str, Tensor]:
        """Every parameter and persistent buffer by dotted name (detached unless ``keep_vars``)."""
        state: OrderedDict[str, Tensor] = OrderedDict()
        for module_prefix, module in self.named_modules(prefix=prefix.rstrip(".")):
            dot = f"{module_prefix}." if module_prefix else ""
            for name, param in module._parameters.items():
                if param is not None:
                    state[dot + name] = param if keep_vars else param.detach()
            for name, buffer in module._buffers.items():
                if buffer is not None and name not in module._non_persistent:
                    state[dot + name] = buffer if keep_vars else buffer.detach()
        return state

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Copy ``state_dict``'s values (tensors or arrays) into the parameters and buffers of the
        same names, on their devices; ``strict`` refuses missing and unexpected keys."""
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            array = value.detach().numpy() if isinstance(value, Tensor) else np.asarray(value)
            if tuple(array.shape) != tuple(target.shape):
                errors.append(
                    f"size mismatch for {key}: copying a param with shape {list(array.shape)} from "
                    "checkpoint, "
                    f"the shape in current model is {list(target.shape)}."
                )
                continue
            with no_grad():
                target.copy_(Tensor(target.backend.from_numpy(array.astype(target.dtype)), target.backend))
        if strict:
            if unexpected:
                errors.insert(0, f"Unexpected key(s) in state_dict: {', '.join(map(repr, unexpected))}.")
            if missing:
                errors.insert(0, f"Missing key(s) in state_dict: {', '.join(map(repr, missing))}.")
        if errors:
            details = "\n\t".join(errors)
            raise InvalidArgumentError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t{details}"
            )
        return IncompatibleKeys(missing, unexpected)

    # Printing.
    def extra_repr(self) -> str:
        """What ``repr`` shows inside this module's parentheses."""
        return ""

    def __repr__(self) -> str:
        lines = [line for line in self.extra_repr().split("\n") if line]
        for name, module in self._modules.items():
            child = repr(module).replace("\n", "\n  ")
            lines.append(f"({name}): {child}")
        if not self._modules:
            return f"{type(self).__name__}({', '.join(lines)})" if len(lines) <= 1 else self._block(lines)
        return self._block(lines)

    def _block(self, lines: list[str]) -> str:
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"
