"""The discrete Fourier transform by its definition, one thread per output value.

The signal axis holds ``L`` values ``inner`` apart, real (``C == 1``) or interleaved complex
(``C == 2``); the transform has length ``N`` (the input cut or padded with zeros to it). A
forward transform writes ``M`` complex values: all ``N``, or ``N // 2 + 1`` one-sided. An inverse
divides by ``N``; one-sided (``HALF``), it reads the first half of a Hermitian spectrum and writes
``N`` real values, as numpy's ``irfft`` does. Angles are reduced exactly, ``k * t mod N``, before
the cosine. Launch ``n`` threads over a 2-D grid of ``width`` threads per grid row.
"""

from __future__ import annotations

import math

from ..frontend import kernel
from ..ir import Scalar, f32, u32
from ..lang import Buffer, Const, ReadBuffer, T, cos, global_id, sin

TAU = 2 * math.pi


@kernel(workgroup=(64,))
def dft(
    x: ReadBuffer[T],
    out: Buffer[T],
    n: u32,
    width: u32,
    L: u32,
    N: u32,
    M: u32,
    inner: u32,
    C: u32,
    T: Const[Scalar],
    INVERSE: Const[bool],
    HALF: Const[bool],
):
    """Thread ``i`` computes output ``k = (i // inner) % M`` of row ``i // (inner * M)``."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        k = (i // inner) % M
        start = ((i // (inner * M)) * L * inner + i % inner) * C
        real = f32(0)
        imag = f32(0)
        hermitian = INVERSE and HALF  # N real samples from the Hermitian extension of the half spectrum
        for j in range(N if hermitian else min(L, N)):
            source = j
            if hermitian and j > N // u32(2):
                source = N - j
            a = f32(0)
            b = f32(0)
            if source < L:
                a = f32(x[start + source * inner * C])
                if u32(2) == C:
                    b = f32(x[start + source * inner * C + u32(1)])
            if hermitian and j > N // u32(2):
                b = -b
            # The twiddle of angle 2 pi (j k mod N) / N from its quarter turn and the angle within
            # it, so that multiples of a quarter turn are exact (sin(pi) is 0, not -8.7e-8).
            quarter = ((j * k) % N) * u32(4)
            turns = quarter // N
            angle = f32(TAU / 4) * f32(quarter % N) / f32(N)
            cosine = cos(angle)
            sine = sin(angle)
            c = cosine
            s = sine
            if turns == u32(1):
                c = -sine
                s = cosine
            if turns == u32(2):
                c = -cosine
                s = -sine
            if turns == u32(3):
                c = sine
                s = -cosine
            if not INVERSE:
                s = -s
            real += a * c - b * s
            imag += a * s + b * c
        if INVERSE:
            real = real / f32(N)
            imag = imag / f32(N)
        if hermitian:
            out[i] = T(real)
        else:
            out[2 * i] = T(real)
            out[2 * i + u32(1)] = T(imag)
