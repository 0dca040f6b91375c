"""Training-step time, SpawnML vs PyTorch CPU, for the digits MLP and CNN of the training tests.

One step is zero_grad, forward, cross-entropy, backward and an Adam step on a fixed batch of
8x8 images, then reading the loss. SpawnML runs it eagerly and as a captured step replayed
(``spawnml.autograd.capture_step``). Both libraries use the same thread count (BLAS through
threadpoolctl, torch through set_num_threads); timed blocks of steps alternate between the runs
after a warm-up, and the table gives the median milliseconds per step and SpawnML's times as
multiples of torch's. WebGPU on lavapipe and OpenCL on PoCL run on the CPU: their figures
measure the CPU.

Usage: python bench/training.py [--device cpu] [--batch 128] [--steps 20] [--rounds 5] [--threads N]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def build(lib, kind: str):
    """The models of tests/training/test_digits.py, in either library."""
    if kind == "mlp":
        return lib.Sequential(lib.Linear(64, 64), lib.ReLU(), lib.Linear(64, 10))
    return lib.Sequential(
        lib.Conv2d(1, 8, 3, padding=1),
        lib.ReLU(),
        lib.MaxPool2d(2),
        lib.Conv2d(8, 16, 3, padding=1),
        lib.ReLU(),
        lib.MaxPool2d(2),
        lib.Flatten(),
        lib.Linear(64, 10),
    )


def stepper(
    library, kind: str, x: np.ndarray, y: np.ndarray, device: str = "cpu", replay: bool = False
) -> Callable[[], float]:
    """A closure running one training step of ``kind`` with ``library`` (spawnml or torch) on
    ``device`` and returning the loss; with ``replay``, SpawnML's step is captured and replayed."""
    model = build(library.nn, kind).to(device)
    optimizer = library.optim.Adam(model.parameters(), lr=1e-3)
    inputs, targets = library.tensor(x, device=device), library.tensor(y, device=device)
    functional = library.nn.functional

    def step(inputs, targets):
        optimizer.zero_grad()
        loss = functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        return loss

    run = library.autograd.capture_step(step) if replay else step
    return lambda: run(inputs, targets).item()


def block(step: Callable[[], float], steps: int) -> float:
    """Milliseconds per step over ``steps`` steps."""
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return 1000 * (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="SpawnML backend (torch runs on its CPU)")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=20, help="steps per timed block")
    parser.add_argument("--rounds", type=int, default=5, help="timed blocks per library")
    parser.add_argument("--threads", type=int, default=None, help="default: torch's thread count")
    args = parser.parse_args()

    import spawnml
    import spawnml.autograd
    import spawnml.nn.functional
    import torch
    from spawnml.threads import intra_op

    threads = args.threads or torch.get_num_threads()
    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    shapes = {"mlp": (args.batch, 64), "cnn": (args.batch, 1, 8, 8)}
    print(
        f"{time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()}, {threads} threads, "
        f"batch {args.batch}, spawnml {spawnml.__version__} on {args.device}, torch {torch.__version__}"
    )
    print(
        "\n| model | SpawnML eager ms/step | SpawnML replay ms/step | torch ms/step | eager / torch "
        "| replay / torch |\n|---|---:|---:|---:|---:|---:|"
    )
    for kind, shape in shapes.items():
        with intra_op(threads):
            compare(spawnml, torch, kind, shape, rng, args)


def compare(spawnml: Any, torch: Any, kind: str, shape: tuple[int, ...], rng: Any, args: Any) -> None:
    """Time SpawnML's eager and replayed steps and torch's on one model; print a table row."""
    x = rng.random(shape, dtype=np.float32)
    y = rng.integers(0, 10, args.batch)
    runners = {
        "eager": stepper(spawnml, kind, x, y, args.device),
        "replay": stepper(spawnml, kind, x, y, args.device, replay=True),
        "torch": stepper(torch, kind, x, y),
    }
    times: dict[str, list[float]] = {name: [] for name in runners}
    for step in runners.values():
        block(step, 3)  # warm-up: kernels compiled, pools filled, the step captured
    for _ in range(args.rounds):
        for name, step in runners.items():
            times[name].append(block(step, args.steps))
    eager, replay, theirs = (statistics.median(times[name]) for name in runners)
    print(
        f"| {kind} | {eager:.2f} | {replay:.2f} | {theirs:.2f} | {eager / theirs:.2f}x "
        f"| {replay / theirs:.2f}x |"
    )


if __name__ == "__main__":
    main()
