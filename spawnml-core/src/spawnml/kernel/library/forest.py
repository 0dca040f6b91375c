"""Tree ensembles (ai.onnx.ml TreeEnsemble): the leaf each row reaches in each tree, then each
row's score of each target over the trees.

Nodes are numbered branches first, then leaves (a child ``c >= branches`` is leaf ``c -
branches``). Branch ``b`` sends a row to ``true_next[b]`` when its feature ``feature[b]``
passes the test ``mode[b]`` (0 ``<=``, 1 ``<``, 2 ``>=``, 3 ``>``, 4 ``==``, 5 ``!=`` the
threshold, 6 one of the branch's members), else to
``false_next[b]``; a NaN feature goes where ``nan_true[b]`` says (``nans`` flags them: WGSL lets
compilers assume comparisons see no NaN). Rows, thresholds, members and weights are of type ``T``.
Launch ``n`` threads over a 2-D grid of ``width``
threads per grid row.
"""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, i32, u32
from ..lang import Buffer, Const, ReadBuffer, T, global_id


@kernel(workgroup=(64,))
def forest_leaves(
    x: ReadBuffer[T],
    nans: ReadBuffer[i32],
    roots: ReadBuffer[i32],
    nodes: ReadBuffer[i32],
    thresholds: ReadBuffer[T],
    member_bounds: ReadBuffer[i32],
    members: ReadBuffer[T],
    leaves: Buffer[i32],
    n: u32,
    width: u32,
    features: u32,
    trees: u32,
    branches: i32,
    depth: u32,
    T: Const[Scalar],
):
    """``leaves[row, tree]``: the leaf row ``row`` of ``x`` (``features`` wide) reaches in ``tree``,
    after at most ``depth`` branches. ``nodes`` holds five ints per branch: feature, mode, true
    child, false child and ``nan_true``; branch ``b``'s members are ``members[member_bounds[b]:
    member_bounds[b + 1]]``."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        row = i // trees
        node = roots[i % trees]
        for _step in range(depth):
            if node >= branches:
                break
            at = u32(node) * u32(5)
            value_at = row * features + u32(nodes[at])
            mode = nodes[at + u32(1)]
            go = nodes[at + u32(4)] != 0
            if nans[value_at] == 0:
                value = x[value_at]
                threshold = thresholds[node]
                go = False
                if mode == 0:
                    go = value <= threshold
                elif mode == 1:
                    go = value < threshold
                elif mode == 2:
                    go = value >= threshold
                elif mode == 3:
                    go = value > threshold
                elif mode == 4:
                    go = value == threshold
                elif mode == 5:
                    go = value != threshold
                else:
                    for m in range(member_bounds[node], member_bounds[node + 1]):
                        if members[m] == value:
                            go = True
                            break
            node = nodes[at + u32(2)] if go else nodes[at + u32(3)]
        leaves[i] = node - branches


@kernel(workgroup=(64,))
def forest_scores(
    leaves: ReadBuffer[i32],
    leaf_targets: ReadBuffer[i32],
    leaf_weights: ReadBuffer[T],
    scores: Buffer[T],
    n: u32,
    width: u32,
    targets: u32,
    trees: u32,
    T: Const[Scalar],
    AGGREGATE: Const[int],
):
    """``scores[row, kind]``: the weights of the leaves of target ``kind`` the row reached, combined
    tree by tree (``AGGREGATE`` 0 average, 1 sum, 2 min, 3 max); 0 where it reached none."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        row = i // targets
        kind = i32(i % targets)
        total = T(0)
        hit = False
        for t in range(trees):
            leaf = leaves[row * trees + t]
            if leaf_targets[leaf] == kind:
                weight = leaf_weights[leaf]
                if AGGREGATE == 2:
                    total = weight if not hit else min(total, weight)
                elif AGGREGATE == 3:
                    total = weight if not hit else max(total, weight)
                else:
                    total += weight
                hit = True
        if AGGREGATE == 0:
            total = total / T(max(trees, u32(1)))
        scores[i] = total if hit else T(0)
