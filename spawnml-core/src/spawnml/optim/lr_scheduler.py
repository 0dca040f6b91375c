"""Learning-rate schedules, as ``torch.optim.lr_scheduler``: each ``step()`` sets every parameter
group's ``lr``, by the same (chainable, multiplicative) formulas torch uses, so the values agree
to the last bit with torch's."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import InvalidArgumentError
from ..tensor import capturing
from .optimizer import Optimizer


class LRScheduler:
    """Base class: subclasses give :meth:`get_lr`, the learning rates at ``last_epoch``."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise InvalidArgumentError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        for index, group in enumerate(optimizer.param_groups):
            if last_epoch == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise InvalidArgumentError(
                    f"param 'initial_lr' is not specified in param_groups[{index}] when resuming an optimizer"
                )
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial = True
        self.step()
        self._initial = False

    def get_lr(self) -> list[float]:
        raise NotImplementedError

    def _current(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]

    def step(self) -> None:
        """Advance one epoch (or iteration) and set the groups' learning rates (again on each replay
        of a captured step that calls it)."""
        if capturing.recorder is not None:
            capturing.recorder.host_call(self.step)
        self.last_epoch += 1
        for group, lr in zip(self.optimizer.param_groups, self.get_lr(), strict=True):
            group["lr"] = lr
        self._last_lr = self._current()

    def get_last_lr(self) -> list[float]:
        """The learning rates the last :meth:`step` set."""
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer (and, as in torch, the functions of :class:`LambdaLR`)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)


class LambdaLR(LRScheduler):
    """``base_lr * lr_lambda(epoch)`` (one function, or one per group)."""

    def __init__(
        self,
        optimizer: Optimizer,
        lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
        last_epoch: int = -1,
    ) -> None:
        groups = len(optimizer.param_groups)
        if callable(lr_lambda):
            self.lr_lambdas = [lr_lambda] * groups
        elif len(lr_lambda) != groups:
            raise InvalidArgumentError(f"Expected {groups} lr_lambdas, but got {len(lr_lambda)}")
        else:
            self.lr_lambdas = list(lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs, strict=True)]


class StepLR(LRScheduler):
    """The rate times ``gamma`` every ``step_size`` epochs."""

    def __init__(
        self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size:
            return self._current()
        return [lr * self.gamma for lr in self._current()]


class MultiStepLR(LRScheduler):
    """The rate times ``gamma`` at each milestone epoch (a repeated milestone counts twice)."""

    def __init__(
        self, optimizer: Optimizer, milestones: Sequence[int], gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        self.milestones = {m: list(milestones).count(m) for m in milestones}
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch not in self.milestones:
            return self._current()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._current()]


class ExponentialLR(LRScheduler):
    """The rate times ``gamma`` every epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return self._current() if self._initial else [lr * self.gamma for lr in self._current()]


class LinearLR(LRScheduler):
    """The rate scaled linearly from ``start_factor`` to ``end_factor`` over ``total_iters`` epochs."""

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if not 0 < start_factor <= 1:
            raise InvalidArgumentError(
                "Starting multiplicative factor expected to be greater than 0 and less or equal to 1."
            )
        if not 0 <= end_factor <= 1:
            raise InvalidArgumentError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in self._current()]
        if self._initial or self.last_epoch > self.total_iters:
            return self._current()
        change = self.end_factor - self.start_factor
        factor = 1.0 + change / (self.total_iters * self.start_factor + (self.last_epoch - 1) * change)
        return [lr * factor for lr in self._current()]


class CosineAnnealingLR(LRScheduler):
    """The rate on a cosine from the base rate down to ``eta_min`` over ``T_max`` epochs (and back)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._initial:
            return self._current()
        pairs = zip(self.base_lrs, self._current(), strict=True)
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [
                lr + (base - self.eta_min) * (1 - math.cos(math.pi / self.T_max)) / 2 for base, lr in pairs
            ]
        ratio = (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / (
            1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max)
        )
        return [ratio * (lr - self.eta_min) + self.eta_min for _, lr in pairs]


class OneCycleLR(LRScheduler):
    """The 1cycle policy: the rate rises from ``max_lr / div_factor`` to ``max_lr`` over
    ``pct_start`` of ``total_steps``, then anneals to ``initial / final_div_factor`` (with a
    third phase when ``three_phase``), the momentum (or Adam's beta1) cycling the other way;
    stepped once per batch."""

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | Sequence[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float = 0.85,
        max_momentum: float = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise InvalidArgumentError(
                    "You must define either total_steps OR (epochs AND steps_per_epoch)"
                )
            total_steps = epochs * steps_per_epoch
        if total_steps <= 0:
            raise InvalidArgumentError(f"Expected positive integer total_steps, but got {total_steps}")
        if not 0 <= pct_start <= 1:
            raise InvalidArgumentError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise InvalidArgumentError(
                f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        self.total_steps, self.anneal_strategy, self.cycle_momentum = (
            total_steps,
            anneal_strategy,
            cycle_momentum,
        )
        rise = float(pct_start * total_steps) - 1
        if three_phase:
            self._phases = [
                (rise, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (
                    float(2 * pct_start * total_steps) - 2,
                    "max_lr",
                    "initial_lr",
                    "base_momentum",
                    "max_momentum",
                ),
                (total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self._phases = [
                (rise, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        groups = optimizer.param_groups
        peaks = list(max_lr) if isinstance(max_lr, Sequence) else [max_lr] * len(groups)
        self._use_beta1 = "betas" in optimizer.defaults
        if cycle_momentum and not self._use_beta1 and "momentum" not in optimizer.defaults:
            raise InvalidArgumentError(
                "optimizer must support momentum or beta1 with `cycle_momentum` option enabled"
            )
        for group, peak in zip(groups, peaks, strict=True):
            if last_epoch == -1:
                group["initial_lr"], group["max_lr"] = peak / div_factor, peak
                group["min_lr"] = group["initial_lr"] / final_div_factor
                if cycle_momentum:
                    self._set_momentum(group, max_momentum)
                    group["max_momentum"], group["base_momentum"] = max_momentum, base_momentum
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group: dict[str, Any], value: float) -> None:
        if self._use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            raise InvalidArgumentError(
                f"Tried to step {step} times. The specified number of total steps is {self.total_steps}"
            )
        rates = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for index, (end, lr_from, lr_to, momentum_from, momentum_to) in enumerate(self._phases):
                if step <= end or index == len(self._phases) - 1:
                    pct = (step - start) / (end - start)
                    rates.append(self._anneal(group[lr_from], group[lr_to], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[momentum_from], group[momentum_to], pct))
                    break
                start = end
        return rates


class ReduceLROnPlateau:
    """The rate times ``factor`` once the metric given to :meth:`step` stops improving for
    ``patience`` epochs, then a ``cooldown``, never below ``min_lr``."""

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: float | Sequence[float] = 0,
        eps: float = 1e-8,
    ) -> None:
        if factor >= 1.0:
            raise InvalidArgumentError("Factor should be < 1.0.")
        if mode not in ("min", "max"):
            raise InvalidArgumentError(f"mode {mode} is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise InvalidArgumentError(f"threshold mode {threshold_mode} is unknown!")
        groups = len(optimizer.param_groups)
        self.min_lrs = list(min_lr) if isinstance(min_lr, Sequence) else [min_lr] * groups
        if len(self.min_lrs) != groups:
            raise InvalidArgumentError(f"expected {groups} min_lrs, got {len(self.min_lrs)}")
        self.optimizer = optimizer
        self.mode, self.factor, self.patience = mode, factor, patience
        self.threshold, self.threshold_mode, self.cooldown, self.eps = (
            threshold,
            threshold_mode,
            cooldown,
            eps,
        )
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = 0
        self.last_epoch = 0
        self._last_lr = [group["lr"] for group in optimizer.param_groups]

    def _better(self, value: float) -> bool:
        if self.mode == "min":
            bound = (
                self.best * (1 - self.threshold)
                if self.threshold_mode == "rel"
                else self.best - self.threshold
            )
            return value < bound
        bound = (
            self.best * (1 + self.threshold) if self.threshold_mode == "rel" else self.best + self.threshold
        )
        return value > bound

    def step(self, metrics: float) -> None:
        """Record this epoch's ``metrics`` and reduce the rates when it has stalled."""
        value = float(metrics)
        self.last_epoch += 1
        if self._better(value):
            self.best, self.num_bad_epochs = value, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for group, floor in zip(self.optimizer.param_groups, self.min_lrs, strict=True):
                reduced = max(group["lr"] * self.factor, floor)
                if group["lr"] - reduced > self.eps:
                    group["lr"] = reduced
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)
