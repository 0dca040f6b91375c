"""Batch inference on Ray Data: a SpawnML session or pipeline as a Dataset batch transform.

Each Ray actor builds one session (or pipeline) when it starts and runs every batch it is given
through it, on the providers and thread count asked for; results are new columns of the Dataset.
Actors ask Ray for a GPU when their providers include a GPU backend, and the transform refuses
to start when Ray sees no GPU rather than run on the CPU in its place. ``ray`` is imported here
only: ``pip install "spawnml-models[ray]"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import ray
import ray.data
import spawnml
from spawnml.errors import InvalidArgumentError
from spawnml.plugins import models
from spawnml.threads import intra_op

Batch = dict[str, np.ndarray]
#: The GPU backends: actors with one of them among their providers ask Ray for a GPU.
GPU_PROVIDERS = frozenset({"cuda", "webgpu", "opencl"})


class SessionTransform:
    """One session per actor: feeds from columns (``inputs``: input name -> column), every output
    (or ``outputs``) written to a column of the same name."""

    def __init__(
        self,
        model: str,
        inputs: Mapping[str, str],
        outputs: Sequence[str] | None,
        providers: Sequence[str] | None,
        threads: int,
    ) -> None:
        options = spawnml.SessionOptions(intra_op_num_threads=threads)
        self.session = spawnml.InferenceSession(model, options, providers=providers)
        self.inputs = dict(inputs)
        self.outputs = list(outputs) if outputs else [arg.name for arg in self.session.get_outputs()]

    def __call__(self, batch: Batch) -> Batch:
        feeds = {name: np.stack(list(batch[column])) for name, column in self.inputs.items()}
        results = self.session.run(self.outputs, feeds)
        return {
            **batch,
            **{name: np.asarray(value) for name, value in zip(self.outputs, results, strict=True)},
        }


class PipelineTransform:
    """One pipeline per actor (a registered model name, see ``spawnml models``): the pipeline of
    each batch's ``column`` written to ``output``."""

    def __init__(
        self, name: str, column: str, output: str, providers: Sequence[str] | None, threads: int
    ) -> None:
        spec = models().get(name)
        if spec is None:
            raise InvalidArgumentError(f"no registered model {name!r} (see `spawnml models`)")
        self.pipeline = spec(providers=providers)
        self.column, self.output, self.threads = column, output, threads

    def __call__(self, batch: Batch) -> Batch:
        with intra_op(self.threads):
            values = self.pipeline(list(batch[self.column]))
        return {**batch, self.output: np.asarray(values)}


def map_session(
    dataset: ray.data.Dataset,
    model: str,
    inputs: Mapping[str, str],
    *,
    outputs: Sequence[str] | None = None,
    providers: Sequence[str] | None = None,
    actors: int = 1,
    threads: int = 1,
    batch_size: int = 256,
) -> ray.data.Dataset:
    """``dataset`` with the outputs of ``model`` (a file path every worker can read) as columns."""
    return _mapped(
        dataset,
        SessionTransform,
        (model, dict(inputs), outputs, providers, threads),
        providers,
        actors,
        threads,
        batch_size,
    )


def map_pipeline(
    dataset: ray.data.Dataset,
    name: str,
    column: str,
    output: str,
    *,
    providers: Sequence[str] | None = None,
    actors: int = 1,
    threads: int = 1,
    batch_size: int = 256,
) -> ray.data.Dataset:
    """``dataset`` with the pipeline ``name`` (e.g. ``all-minilm-l6-v2``) of ``column`` as ``output``."""
    return _mapped(
        dataset,
        PipelineTransform,
        (name, column, output, providers, threads),
        providers,
        actors,
        threads,
        batch_size,
    )


def _mapped(
    dataset: ray.data.Dataset,
    transform: type,
    arguments: tuple[Any, ...],
    providers: Sequence[str] | None,
    actors: int,
    threads: int,
    batch_size: int,
) -> ray.data.Dataset:
    if actors < 1 or threads < 1 or batch_size < 1:
        raise InvalidArgumentError(
            f"actors, threads and batch_size must be at least 1 (got {actors}, {threads}, {batch_size})"
        )
    gpus = 1 if GPU_PROVIDERS & set(providers or ()) else 0
    if gpus and ray.cluster_resources().get("GPU", 0) < 1:
        raise InvalidArgumentError(
            f"providers {list(providers or ())} include a GPU backend, but Ray sees no GPU in the cluster"
        )
    return dataset.map_batches(
        transform,
        fn_constructor_args=arguments,
        batch_size=batch_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=actors),
        num_cpus=threads,
        num_gpus=gpus,
    )
