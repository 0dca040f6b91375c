"""The register-tiled loop of 1x1 convolutions (``tiles.pointwise``) against numpy's float64
products, within rtol / atol 1e-4 (float32 sums of up to 300 products in another order).

The shapes cover a tile exactly, tiles moved back to end at the edge of either axis (sums
computed twice), pixel rows narrower than a tile (the last vector partly used, every tail width),
and the finishing pass: bias, residual, bounds, NaN.
"""

from __future__ import annotations

import numpy as np
import pytest
from spawnml_cpu.kernels import loops, tiles

TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}


def _operands(outputs: int, depth: int, pixels: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((outputs, depth), dtype=np.float32)
    x = rng.standard_normal((depth, pixels), dtype=np.float32)
    bias = rng.standard_normal(outputs, dtype=np.float32)
    return w, x, bias


def _reference(w, x, bias, low, high, residual=None) -> np.ndarray:
    sums = w.astype(np.float64) @ x + bias[:, None]
    if residual is not None:
        sums += residual
    return np.clip(sums, low, high)


def _pointwise(w, x, bias, low=-np.inf, high=np.inf, residual=None, activation=loops.NO_ACTIVATION):
    y = np.full((w.shape[0], x.shape[1]), np.nan, np.float32)  # every output must be written
    tiles.pointwise(w, x, bias, low, high, residual, y, activation)
    return y


SHAPES = [
    (tiles.ROWS, 1, tiles.WIDTH),
    (tiles.ROWS, 300, tiles.WIDTH * 3),
    (tiles.ROWS + 1, 17, tiles.WIDTH + 1),
    (45, 40, 49),
    (160, 96, 196),
    (13, 20, 930),
]


@pytest.mark.parametrize(("outputs", "depth", "pixels"), SHAPES)
def test_products_match_numpy(outputs, depth, pixels):
    w, x, bias = _operands(outputs, depth, pixels)
    np.testing.assert_allclose(_pointwise(w, x, bias), _reference(w, x, bias, -np.inf, np.inf), **TOLERANCE)


@pytest.mark.parametrize(("outputs", "depth", "pixels"), SHAPES)
def test_silu_after_each_tile_matches_numpy(outputs, depth, pixels):
    """Tiles moved back to end at an edge overlap the tiles before them: none is activated twice."""
    w, x, bias = _operands(outputs, depth, pixels)
    got = _pointwise(w, x, bias, activation=(loops.SWISH, 0.0, 0.0))
    sums = _reference(w, x, bias, -np.inf, np.inf)
    np.testing.assert_allclose(got, sums / (1 + np.exp(-sums)), **TOLERANCE)


@pytest.mark.parametrize("pixels", range(tiles.WIDTH - tiles.LANES + 1, tiles.WIDTH + 1))
def test_rows_narrower_than_a_tile_match_numpy(pixels):
    """Every width of the partly used last vector; lanes past the row are neither read nor written."""
    w, x, bias = _operands(8, 5, pixels, seed=pixels)
    view = np.full((8 * (pixels + 3),), 7.0, np.float32)  # what follows the output must be left alone
    rows = view[: 8 * pixels].reshape(8, pixels)
    tiles.pointwise(w, x, bias, -np.inf, np.inf, None, rows, loops.NO_ACTIVATION)
    np.testing.assert_allclose(rows, _reference(w, x, bias, -np.inf, np.inf), **TOLERANCE)
    assert (view[8 * pixels :] == 7.0).all()


def test_residual_and_bounds_match_numpy():
    w, x, bias = _operands(22, 33, 150, seed=1)
    residual = np.random.default_rng(2).standard_normal((22, 150), dtype=np.float32) * 4
    expected = _reference(w, x, bias, -1.0, 2.0, residual)
    np.testing.assert_allclose(_pointwise(w, x, bias, -1.0, 2.0, residual), expected, **TOLERANCE)
    assert (expected == -1.0).any() and (expected == 2.0).any()  # both bounds cut some sums


def test_nan_spreads_to_the_outputs_that_read_it_and_stays_through_the_bounds():
    w, x, bias = _operands(12, 10, 100, seed=3)
    x[4, 37] = np.nan
    y = _pointwise(w, x, bias, 0.0, 6.0)
    expected = np.zeros(y.shape, bool)
    expected[:, 37] = True
    np.testing.assert_array_equal(np.isnan(y), expected)


@pytest.mark.parametrize(
    ("outputs", "depth", "pixels", "fits"),
    [
        (tiles.ROWS, 1, tiles.WIDTH - tiles.LANES + 1, True),
        (tiles.ROWS - 1, 8, 1000, False),
        (8, 0, 1000, False),
        (8, 8, tiles.WIDTH - tiles.LANES, False),
    ],
)
def test_fits_names_the_shapes_it_takes(outputs, depth, pixels, fits):
    assert tiles.fits(outputs, depth, pixels) is fits
