"""TreeEnsemble (ai.onnx.ml, version 5) on the GPU: one thread per row and tree finds the leaf it
reaches, one per row and target combines the leaves' weights (:mod:`spawnml.kernel.library.forest`),
then the post transform runs as Softmax's row kernel or a generated Sigmoid.

The forest is laid out on the host from the node's attributes, its values in the rows' type on
the device (float32, float16 held as float32, or float64). Thresholds and set members may be of a
wider type than the rows: each threshold is rounded toward the side that keeps its test exact
(``x <= t`` is ``x <= t`` rounded down, ``x < t`` is ``x < t`` rounded up, ...), equality with a
value the rows' type cannot hold never passes, and such members are dropped. SOFTMAX_ZERO and
PROBIT are refused at load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..ir import Node
from ..kernel.library.chain import step
from ..kernel.library.forest import forest_leaves, forest_scores
from ..kernel.library.rows import softmax_rows
from ..ops.defs.ml import ML
from .array import DeviceArray
from .fused import run_chain
from .table import GPU_KERNELS, GPUContext

LEQ, LT, GTE, GT, EQ, NEQ, MEMBER = range(7)
#: The post transforms run on the GPU, by TreeEnsemble's codes.
NONE, SOFTMAX, LOGISTIC = 0, 1, 2
AVERAGE, SUM, MIN, MAX = range(4)
FLOAT32 = np.dtype(np.float32)


@dataclass(frozen=True)
class Forest:
    """A forest as the kernels read it (see :mod:`spawnml.kernel.library.forest`)."""

    nodes: np.ndarray  # (branches, 5) int32: feature, mode, true child, false child, NaN goes true
    thresholds: np.ndarray  # (branches,) of the rows' type
    member_bounds: np.ndarray  # (branches + 1,) int32
    members: np.ndarray  # of the rows' type
    roots: np.ndarray  # int32
    leaf_targets: np.ndarray  # int32
    leaf_weights: np.ndarray  # of the rows' type
    targets: int
    depth: int
    width: int  # features the rows must have


def _ints(attrs: dict[str, Any], name: str) -> np.ndarray:
    value = attrs.get(name)
    return np.zeros(0, np.int64) if value is None else np.asarray(value, np.int64).reshape(-1)


def _values(attrs: dict[str, Any], name: str) -> np.ndarray:
    value = attrs.get(name)
    return np.zeros(0, np.float64) if value is None else np.asarray(value).reshape(-1)


def _exact_tests(modes: np.ndarray, splits: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """The modes and ``dtype`` thresholds that test ``dtype`` values exactly as ``modes`` test them
    against ``splits`` (of any float type): an inexact threshold is rounded down for ``<=`` and
    ``>``, up for ``<`` and ``>=``; equality with a value ``dtype`` cannot hold (or NaN) becomes an
    empty membership, inequality with it ``<= inf``, an order test with NaN an empty membership."""
    wide = splits.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        near = wide.astype(dtype)
    down = np.where(near <= wide, near, np.nextafter(near, dtype.type(-np.inf)))
    up = np.where(near >= wide, near, np.nextafter(near, dtype.type(np.inf)))
    thresholds = np.where(np.isin(modes, (LEQ, GT)), down, up)
    inexact = (near != wide) & (modes < MEMBER)
    never = inexact & ((modes == EQ) | np.isnan(wide)) & (modes != NEQ)
    always = inexact & (modes == NEQ)
    thresholds = np.where(never, 0, np.where(always, np.inf, thresholds)).astype(dtype)
    return np.where(never, MEMBER, np.where(always, LEQ, modes)), thresholds


def _depth(roots: np.ndarray, nodes: np.ndarray, branches: int) -> int:
    """The most branches on a path from a root; refuses a forest with a cycle."""
    frontier, depth = np.unique(roots), 0
    while True:
        frontier = frontier[frontier < branches]
        if not len(frontier):
            return depth
        depth += 1
        if depth > branches:
            raise InvalidArgumentError("the trees have a cycle")
        frontier = np.unique(nodes[frontier][:, 2:4])


def _member_sets(values: np.ndarray, count: int) -> list[np.ndarray]:
    """The ``count`` value sets of the membership nodes: ``values`` lists them in node order,
    each ended by a NaN (the last one's NaN may be left out)."""
    ends = np.flatnonzero(np.isnan(values))
    complete = len(ends) >= count or (
        len(ends) == count - 1 and (not len(ends) or len(values) > ends[-1] + 1)
    )
    if count and not complete:
        raise InvalidArgumentError(f"membership_values holds fewer than the {count} sets of the nodes")
    return [part[~np.isnan(part)] for part in np.split(values, ends)]


def forest_of(attrs: dict[str, Any], dtype: np.dtype = FLOAT32) -> Forest:
    """The forest the attributes describe, its values in ``dtype`` (the rows' type on the device);
    :class:`InvalidArgumentError` says why they do not describe one."""
    features = _ints(attrs, "nodes_featureids")
    branches = len(features)
    modes = _ints(attrs, "nodes_modes")
    splits = _values(attrs, "nodes_splits")
    leaf_targets, weights = _ints(attrs, "leaf_targetids"), _values(attrs, "leaf_weights")
    leaves = len(leaf_targets)
    children = [
        _ints(attrs, f"nodes_{side}{kind}") for side in ("true", "false") for kind in ("nodeids", "leafs")
    ]
    if any(len(a) != branches for a in (modes, splits, *children)) or len(weights) != leaves:
        raise InvalidArgumentError("the node and leaf attributes must each have one entry per node or leaf")
    if (len(modes) and (modes.min() < LEQ or modes.max() > MEMBER)) or (features < 0).any():
        raise InvalidArgumentError("nodes_modes must be in [0, 6] and nodes_featureids not negative")
    nexts = []
    for ids, to_leaf in (children[:2], children[2:]):
        leaf = to_leaf == 1
        if ((ids < 0) | (ids >= np.where(leaf, leaves, branches))).any():
            raise InvalidArgumentError("a node's child is outside the nodes or leaves")
        nexts.append(ids + branches * leaf)
    roots = _ints(attrs, "tree_roots")
    if not len(roots) or roots.min() < 0 or roots.max() >= branches + leaves:
        raise InvalidArgumentError("tree_roots must name nodes of the forest")
    targets = int(attrs.get("n_targets") or leaf_targets.max(initial=-1) + 1)
    if len(leaf_targets) and (leaf_targets.min() < 0 or leaf_targets.max() >= targets):
        raise InvalidArgumentError(f"leaf_targetids must lie in [0, {targets})")
    sets = iter(_member_sets(_values(attrs, "membership_values").astype(np.float64), (modes == MEMBER).sum()))
    tracks = _ints(attrs, "nodes_missing_value_tracks_true")[:branches]
    nan_true = np.pad(tracks == 1, (0, branches - len(tracks))) | (modes == NEQ)
    tests, thresholds = _exact_tests(modes, splits, dtype)
    bounds, members = np.zeros(branches + 1, np.int64), []
    for b in np.flatnonzero(modes == MEMBER):
        members += [v for v in next(sets) if dtype.type(v) == v]
        bounds[b + 1 :] = len(members)
    nodes = np.stack([features, tests, *nexts, nan_true], axis=1).reshape(branches, 5)
    return Forest(
        nodes=nodes.astype(np.int32),
        thresholds=thresholds if branches else np.zeros(1, dtype),
        member_bounds=bounds.astype(np.int32),
        members=np.array(members or [0], dtype),
        roots=roots.astype(np.int32),
        leaf_targets=np.array(leaf_targets if leaves else [-1], np.int32),
        leaf_weights=np.array(weights if leaves else [0], dtype),
        targets=targets,
        depth=_depth(roots, nodes, branches),
        width=int(features.max(initial=-1)) + 1,
    )


def _check(node: Node, opset: int) -> str | None:
    if node.attrs.get("aggregate_function", SUM) not in (AVERAGE, SUM, MIN, MAX):
        return f"aggregate_function {node.attrs['aggregate_function']} is not one of 0 to 3"
    transform = node.attrs.get("post_transform", NONE)
    if transform not in (NONE, SOFTMAX, LOGISTIC):
        return f"post_transform {transform} (SOFTMAX_ZERO or PROBIT) is not run on the GPU"
    try:
        forest_of(node.attrs)
    except InvalidArgumentError as error:
        return f"not a valid tree ensemble: {error}"
    return None


@GPU_KERNELS.register(
    "TreeEnsemble", domain=ML, since=5, check=_check, dtypes=(np.float32, np.float16, np.float64)
)
def tree_ensemble(ctx: GPUContext, x: DeviceArray) -> DeviceArray:
    """``(N, n_targets)`` scores of the rows of ``x`` (a vector is one row), in ``x``'s type,
    computed in float32 (float64 for float64 rows)."""
    work = np.dtype(x.elem.numpy)
    forest = forest_of(ctx.attrs, work)
    rows = x.view((1, x.size) if len(x.shape) < 2 else (x.shape[0], math.prod(x.shape[1:])))
    count, features = rows.shape
    if features < forest.width:
        raise InvalidArgumentError(f"the trees test {forest.width} features, the input has {features}")
    trees, upload = len(forest.roots), ctx.backend.from_numpy
    scores = ctx.backend.empty((count, forest.targets), work)
    if scores.size:
        nans = run_chain(ctx, (step("IsNaN", [0], "int32"),), [rows], "is_nan")
        leaves = ctx.backend.empty((count, trees), np.dtype(np.int32))
        layout = [forest.roots, forest.nodes.reshape(-1) if forest.nodes.size else np.zeros(1, np.int32)]
        layout += [forest.thresholds, forest.member_bounds, forest.members]
        buffers = [rows, nans, *map(upload, layout), leaves]
        scalars = {"features": features, "trees": trees, "branches": len(forest.nodes), "depth": forest.depth}
        ctx.backend.launch_flat(forest_leaves.specialize(T=x.elem), buffers, leaves.size, **scalars)
        k = forest_scores.specialize(T=x.elem, AGGREGATE=int(ctx.attrs.get("aggregate_function", SUM)))
        buffers = [leaves, upload(forest.leaf_targets), upload(forest.leaf_weights), scores]
        ctx.backend.launch_flat(k, buffers, scores.size, targets=forest.targets, trees=trees)
        scores = _transformed(ctx, scores, int(ctx.attrs.get("post_transform", NONE)))
    if x.dtype != scores.dtype:
        return run_chain(ctx, (step("Cast", [0], x.dtype.name),), [scores], "to_input_type")
    return scores


def _transformed(ctx: GPUContext, scores: DeviceArray, transform: int) -> DeviceArray:
    """The post transform over each row; one score per row is left as it is."""
    if transform == NONE or scores.shape[1] == 1:
        return scores
    if transform == LOGISTIC:
        return run_chain(ctx, (step("Sigmoid", [0], scores.dtype.name),), [scores], "logistic")
    out = ctx.backend.empty(scores.shape, scores.dtype)
    k = softmax_rows.specialize(T=scores.elem)
    ctx.backend.launch_flat(k, [scores, out], scores.shape[0], D=scores.shape[1], inner=1)
    return out
