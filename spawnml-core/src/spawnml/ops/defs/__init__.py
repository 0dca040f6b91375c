"""Core's operator schemas, one module per operator family."""

from __future__ import annotations

from ..schema import OpSchema
from . import (
    attention,
    contrib,
    contrib_quant,
    control,
    elementwise,
    fused,
    loss,
    misc,
    ml,
    nn,
    quant_gguf,
    recurrent,
    reduce,
    signal,
    strings,
    tensor,
    train,
    vision,
)

SCHEMAS: list[OpSchema] = [
    schema
    for family in (
        elementwise,
        reduce,
        tensor,
        nn,
        control,
        recurrent,
        attention,
        loss,
        vision,
        signal,
        misc,
        strings,
        ml,
        contrib,
        contrib_quant,
        quant_gguf,
        fused,
        train,
    )
    for schema in family.SCHEMAS
]
