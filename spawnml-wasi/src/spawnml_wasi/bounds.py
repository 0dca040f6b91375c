"""What one guest may ask of the host: each bound, when passed, answers ``too_large``."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20


@dataclass(frozen=True)
class GuestBounds:
    """Per-guest bounds. The defaults fit the models a small device runs; raise them for larger."""

    #: Bytes of one ``load`` call, all its builders together.
    max_model_bytes: int = 512 * MIB
    #: Builders (buffers) of one ``load`` call.
    max_builders: int = 4
    #: Graphs a guest holds at once (``load`` and ``load_by_name`` each make one).
    max_graphs: int = 16
    #: Execution contexts a guest holds at once.
    max_contexts: int = 64
    #: Dimensions of a tensor passed to ``set_input``.
    max_rank: int = 8
    #: Elements of a tensor passed to ``set_input``.
    max_elements: int = 1 << 28
    #: Bytes of a name passed to ``load_by_name``.
    max_name_bytes: int = 4096
    #: Bytes of the guest's linear memory (the engine refuses to grow it further).
    max_memory_bytes: int = 2048 * MIB
