"""An inference session whose fixed-shape runs are replayed as one graph each: :class:`GraphSession`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from spawnml import InferenceSession, Tensor, plugins
from spawnml.errors import InvalidArgumentError
from spawnml.gpu import GPUBackend
from spawnml.gpu.array import DeviceArray

from .graphs import GraphReport, GraphRunner


class GraphSession:
    """``session``'s runs, each signature (feed shapes and element types, outputs asked for) run
    eagerly ``warmup`` times, then captured once as a graph on the session's first provider and
    replayed after (see :mod:`.graphs`). A run that cannot be captured (host data written into a
    buffer the graph uses, a value read on the host that differs from the capture's, an error of
    the library) runs eagerly, as ``session`` runs it, and :attr:`report` says why.

    Feeds are copied into the capture's own input buffers and outputs out of its output
    buffers on each run, so results stay valid across runs, as the session's do.
    """

    def __init__(self, session: InferenceSession, warmup: int = 1) -> None:
        if session.graph.states:
            raise InvalidArgumentError(
                "a session that carries state from run to run feeds it from the last run's outputs, "
                "which a replayed graph would not read; run it without GraphSession"
            )
        backend = plugins.backends()[session.get_providers()[0]]
        if not isinstance(backend, GPUBackend):
            raise InvalidArgumentError(f"graphs are replayed on GPU backends, not {backend.name!r}")
        self.session = session
        self.backend = backend
        self._inputs = [arg.name for arg in session.get_inputs()]
        self._outputs = [arg.name for arg in session.get_outputs()]
        self._runner = GraphRunner(backend, warmup)

    @property
    def report(self) -> GraphReport:
        return self._runner.report

    def run(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any]) -> list[np.ndarray]:
        """As :meth:`InferenceSession.run`: host arrays in and out."""
        return [t.numpy() for t in self.run_with_tensors(output_names, input_feed)]

    def run_with_tensors(
        self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any]
    ) -> list[Tensor]:
        """As :meth:`InferenceSession.run_with_tensors`: outputs stay on the device."""
        unknown = sorted(set(input_feed) - set(self._inputs))
        if unknown:
            raise InvalidArgumentError(f"{unknown} are not inputs of the model (inputs: {self._inputs})")
        names = list(output_names or self._outputs)
        fed = [name for name in self._inputs if name in input_feed]
        backend = self.backend

        def body(inputs: list[DeviceArray]) -> list[Any]:
            feeds = {name: Tensor(x, backend) for name, x in zip(fed, inputs, strict=True)}
            results = self.session.run_with_tensors(names, feeds)
            return [r.buffer if isinstance(r, Tensor) and r.backend is backend else r for r in results]

        inputs = [self._placed(name, input_feed[name]) for name in fed]
        outputs = self._runner.run(body, inputs, key=(tuple(fed), tuple(names)))
        return [Tensor(y, backend) if isinstance(y, DeviceArray) else y for y in outputs]

    def _placed(self, name: str, feed: Any) -> DeviceArray:
        if isinstance(feed, Tensor):
            if feed.backend is not self.backend:
                raise InvalidArgumentError(
                    f"input {name!r} is on {feed.device!r}; a graph on {self.backend.name!r} reads it there"
                )
            return feed.buffer
        return self.backend.from_numpy(np.asarray(feed))
