"""The optimizer base, as ``torch.optim.Optimizer``: parameter groups, per-parameter state, and
state dicts that refer to parameters by their position."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

from ..autograd.dispatch import run
from ..autograd.mode import enable_grad, no_grad
from ..errors import InvalidArgumentError
from ..ops.defs.train import DOMAIN
from ..tensor import Tensor

ParamsT = Iterable[Tensor] | Iterable[dict[str, Any]]


class Optimizer:
    """Holds ``param_groups`` (dicts of ``params`` and hyperparameters) and ``state`` (per parameter).

    Subclasses implement :meth:`update`, one fused operator per parameter; :meth:`step` calls it
    for every parameter that has a gradient.
    """

    def __init__(self, params: ParamsT, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.state: dict[Tensor, dict[str, Any]] = {}
        self.param_groups: list[dict[str, Any]] = []
        groups: list[Any] = list(params)
        if not groups:
            raise InvalidArgumentError("optimizer got an empty parameter list")
        for group in groups if isinstance(groups[0], dict) else [{"params": groups}]:
            self.add_param_group(group)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters, its missing hyperparameters taken from the defaults."""
        params = param_group["params"]
        group = {**param_group, "params": [params] if isinstance(params, Tensor) else list(params)}
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        for p in group["params"]:
            if not isinstance(p, Tensor):
                raise InvalidArgumentError(
                    f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}"
                )
            if not p.is_leaf:
                raise InvalidArgumentError("can't optimize a non-leaf Tensor")
            if id(p) in seen:
                raise InvalidArgumentError("some parameters appear in more than one parameter group")
            seen.add(id(p))
        for name, default in self.defaults.items():
            group.setdefault(name, default)
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop every parameter's gradient (or zero it in place with ``set_to_none=False``)."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    with no_grad():
                        p.grad = p.grad.detach().zero_()

    @no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; ``closure`` re-evaluates the loss first."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self.update(p, p.grad, group, self.state.setdefault(p, {}))
        return loss

    def update(self, param: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        """Apply one step to ``param`` with this group's hyperparameters and its ``state``."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: state}, "param_groups": [... "params": [index, ...]]}``, as torch's."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            ids = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": ids})
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Take the hyperparameters and state of ``state_dict`` (from an optimizer over parameters of
        the same shapes, in the same order); state tensors move to each parameter's device."""
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups):
            raise InvalidArgumentError("loaded state dict has a different number of parameter groups")
        by_index: dict[int, Tensor] = {}
        for group, saved_group in zip(self.param_groups, saved, strict=True):
            if len(group["params"]) != len(saved_group["params"]):
                raise InvalidArgumentError(
                    "loaded state dict contains a parameter group that doesn't match the size of "
                    "optimizer's group"
                )
            by_index.update(zip(saved_group["params"], group["params"], strict=True))
        self.state = {}
        for key, values in state_dict["state"].items():
            param = by_index[int(key)]
            self.state[param] = {
                name: _on_device_of(value, param) for name, value in copy.copy(values).items()
            }
        for group, saved_group in zip(self.param_groups, saved, strict=True):
            group.update({k: v for k, v in saved_group.items() if k != "params"})


def _on_device_of(value: Any, param: Tensor) -> Any:
    if not isinstance(value, Tensor):
        return value
    return Tensor(param.backend.from_numpy(value.detach().numpy().copy()), param.backend)


def fused_step(
    op: str, param: Tensor, grad: Tensor, state: list[Tensor | None], attrs: Callable[[], dict[str, Any]]
) -> tuple[Tensor | None, ...]:
    """Run the fused ``op`` on ``param``, ``grad`` and ``state``, write the results back into them
    in place, and return the outputs (a state entry given as ``None`` is returned, not written).

    ``attrs`` advances the per-parameter step count and gives the operator's attributes from the
    group's current hyperparameters; a captured step calls it again on each replay.
    """
    outputs = run(op, [param, grad, *state], outputs=1 + len(state), domain=DOMAIN, refresh=attrs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    for target, value in zip([param, *state], outputs, strict=True):
        if target is not None and value is not None:
            target._replace(value, rebind=False)
    return outputs
