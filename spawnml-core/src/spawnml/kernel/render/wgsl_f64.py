"""Double-precision math for WGSL, which has ``f64`` (wgpu's ``shader-f64``) but no transcendentals
on it: Vulkan's GLSL.std.450 ``Exp``, ``Log``, ``Sin``, ``Pow``... take 16- and 32-bit floats only.

Each function is argument reduction with exact steps (``ldexp``, Cody-Waite constants) and a
series evaluated in ``f64``; ``tests/test_gpu_float64.py`` holds them within 1e-13 of numpy. sin,
cos and tan reduce their argument exactly below ``2**20 * pi / 2`` only.
"""

from __future__ import annotations

import math

#: ln 2 split so that ``k * LN2_HI`` is exact for the ``k`` exp meets (fdlibm's constants).
LN2_HI, LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10
#: pi / 2 in three parts of 33 bits and a tail (fdlibm's pio2_1, pio2_2, pio2_2t).
PIO2 = (1.57079632673412561417e00, 6.07710050630396597660e-11, 2.02226624879595063154e-21)
#: Below it erf sums its Taylor series; from it on, erfc's continued fraction (60 terms) converges.
ERF_SERIES_BELOW = 2.0


def lit(value: float) -> str:
    """``value`` as a WGSL f64 literal."""
    return f"{value!r}lf"


def horner(variable: str, coefficients: list[float]) -> str:
    """``c0 + v * (c1 + v * (...))`` for coefficients from the constant term up."""
    text = lit(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        text = f"({lit(c)} + {variable} * {text})"
    return text


_INF = "f64(bitcast<f32>(spawn_f64_inf_bits))"
_NAN = "f64(bitcast<f32>(spawn_f64_nan_bits))"

_COMMON = """const spawn_f64_inf_bits: u32 = 0x7f800000u;
const spawn_f64_nan_bits: u32 = 0x7fc00000u;
fn spawn_isnan_f64(x: f64) -> bool {
  return (bitcast<u32>(f32(x)) & 0x7fffffffu) > 0x7f800000u;
}"""

_EXP = f"""fn spawn_exp_f64(x: f64) -> f64 {{
  if (x > 710.0lf) {{ return {_INF}; }}
  if (x < -746.0lf) {{ return 0.0lf; }}
  let k = round(x * {lit(1 / math.log(2))});
  let r = (x - k * {lit(LN2_HI)}) - k * {lit(LN2_LO)};
  return ldexp({horner("r", [1 / math.factorial(n) for n in range(14)])}, i32(k));
}}"""

_LOG = f"""fn spawn_log_f64(x: f64) -> f64 {{
  if (spawn_isnan_f64(x) || x < 0.0lf) {{ return {_NAN}; }}
  if (x == 0.0lf) {{ return -{_INF}; }}
  if (x > {lit(float.fromhex("0x1.fffffffffffffp+1023"))}) {{ return x; }}
  var m = x;
  var e = 0.0lf;
  while (m < 1e-30lf) {{ m = m * {lit(2.0**100)}; e = e - 100.0lf; }}
  while (m > 1e30lf) {{ m = m * {lit(2.0**-100)}; e = e + 100.0lf; }}
  let b = floor(log2(f32(m)));
  m = ldexp(m, -i32(b));
  e = e + f64(b);
  if (m >= 2.0lf) {{ m = m * 0.5lf; e = e + 1.0lf; }}
  if (m < 1.0lf) {{ m = m * 2.0lf; e = e - 1.0lf; }}
  if (m > {lit(math.sqrt(2))}) {{ m = m * 0.5lf; e = e + 1.0lf; }}
  let s = (m - 1.0lf) / (m + 1.0lf);
  let z = s * s;
  let series = 2.0lf * s * {horner("z", [1 / (2 * n + 1) for n in range(11)])};
  return e * {lit(LN2_HI)} + (series + e * {lit(LN2_LO)});
}}"""

#: Taylor coefficients of ``(sin r - r) / r**3`` and ``(cos r - 1 + r**2 / 2) / r**4`` in ``z = r**2``.
_SIN = [(-1) ** (n + 1) / math.factorial(2 * n + 3) for n in range(9)]
_COS = [(-1) ** n / math.factorial(2 * n + 4) for n in range(8)]

_TRIG = f"""fn spawn_trig_f64(x: f64, quarter_turns: f64) -> f64 {{
  let k = round(x * {lit(2 / math.pi)});
  let r = ((x - k * {lit(PIO2[0])}) - k * {lit(PIO2[1])}) - k * {lit(PIO2[2])};
  let z = r * r;
  let s = r + r * z * {horner("z", _SIN)};
  let c = 1.0lf - 0.5lf * z + z * z * {horner("z", _COS)};
  let q = (k + quarter_turns) - 4.0lf * floor((k + quarter_turns) * 0.25lf);
  if (q == 0.0lf) {{ return s; }}
  if (q == 1.0lf) {{ return c; }}
  if (q == 2.0lf) {{ return -s; }}
  return -c;
}}
fn spawn_sin_f64(x: f64) -> f64 {{ return spawn_trig_f64(x, 0.0lf); }}
fn spawn_cos_f64(x: f64) -> f64 {{ return spawn_trig_f64(x, 1.0lf); }}"""

_TANH = f"""fn spawn_tanh_f64(x: f64) -> f64 {{
  let a = abs(x);
  var t = 1.0lf;
  if (a < 0.5lf) {{
    let y = 2.0lf * a;
    let expm1 = y * {horner("y", [1 / math.factorial(n + 1) for n in range(20)])};
    t = expm1 / (expm1 + 2.0lf);
  }} else if (a < 22.0lf) {{
    t = 1.0lf - 2.0lf / (spawn_exp_f64(2.0lf * a) + 1.0lf);
  }} else if (spawn_isnan_f64(a)) {{
    return x;
  }}
  return select(t, -t, x < 0.0lf);
}}"""

_TAN = """fn spawn_tan_f64(x: f64) -> f64 {
  return spawn_sin_f64(x) / spawn_cos_f64(x);
}"""

_HYPERBOLIC = f"""fn spawn_sinh_f64(x: f64) -> f64 {{
  if (abs(x) < 1.0lf) {{
    let z = x * x;
    return x + x * z * {horner("z", [1 / math.factorial(2 * n + 3) for n in range(9)])};
  }}
  let half = spawn_exp_f64(abs(x) - {lit(math.log(2))});
  return select(1.0lf, -1.0lf, x < 0.0lf) * (half - 0.25lf / half);
}}
fn spawn_cosh_f64(x: f64) -> f64 {{
  let half = spawn_exp_f64(abs(x) - {lit(math.log(2))});
  return half + 0.25lf / half;
}}"""

#: log(1 + u) = 2 atanh(u / (2 + u)), summed as log's series where the quotient is small.
_LOG1P = f"""fn spawn_log1p_f64(u: f64) -> f64 {{
  if (abs(u) > 0.4lf) {{ return spawn_log_f64(1.0lf + u); }}
  let s = u / (2.0lf + u);
  let z = s * s;
  return 2.0lf * s * {horner("z", [1 / (2 * n + 1) for n in range(13)])};
}}
fn spawn_asinh_f64(x: f64) -> f64 {{
  let a = abs(x);
  var r = spawn_log_f64(a) + {lit(math.log(2))};
  if (a < 1e8lf) {{ r = spawn_log1p_f64(a + a * a / (1.0lf + sqrt(1.0lf + a * a))); }}
  return select(r, -r, x < 0.0lf);
}}
fn spawn_acosh_f64(x: f64) -> f64 {{
  if (x > 1e8lf) {{ return spawn_log_f64(x) + {lit(math.log(2))}; }}
  let t = x - 1.0lf;
  return spawn_log1p_f64(t + sqrt(2.0lf * t + t * t));
}}
fn spawn_atanh_f64(x: f64) -> f64 {{
  return 0.5lf * spawn_log1p_f64(2.0lf * x / (1.0lf - x));
}}"""

#: atan: two halvings, atan(x) = 2 atan(x / (1 + sqrt(1 + x**2))), take |x| <= 1 below tan(pi / 16).
_ATAN = f"""fn spawn_atan_f64(x: f64) -> f64 {{
  let a = abs(x);
  var t = select(a, 1.0lf / a, a > 1.0lf);
  t = t / (1.0lf + sqrt(1.0lf + t * t));
  t = t / (1.0lf + sqrt(1.0lf + t * t));
  let z = t * t;
  var r = 4.0lf * t * {horner("z", [(-1) ** n / (2 * n + 1) for n in range(13)])};
  if (a > 1.0lf) {{ r = {lit(math.pi / 2)} - r; }}
  if (spawn_isnan_f64(a)) {{ return x; }}
  return select(r, -r, x < 0.0lf);
}}"""

_POW = """fn spawn_pow_f64(x: f64, y: f64) -> f64 {
  return spawn_exp_f64(y * spawn_log_f64(x));
}"""

_ERF = f"""fn spawn_erf_f64(x: f64) -> f64 {{
  let a = abs(x);
  if (a < {lit(ERF_SERIES_BELOW)}) {{
    var term = x;
    var sum = x;
    for (var n = 1; n < 48; n++) {{
      term = -term * x * x / f64(n);
      sum = sum + term / f64(2 * n + 1);
    }}
    return {lit(2 / math.sqrt(math.pi))} * sum;
  }}
  var f = a;
  for (var n = 60; n > 0; n--) {{
    f = a + 0.5lf * f64(n) / f;
  }}
  let erfc = spawn_exp_f64(-a * a) / ({lit(math.sqrt(math.pi))} * f);
  return select(1.0lf - erfc, erfc - 1.0lf, x < 0.0lf);
}}"""

#: Each function's source and the functions it calls.
FUNCTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "exp": (_EXP, ()),
    "log": (_LOG, ()),
    "sin": (_TRIG, ()),
    "cos": (_TRIG, ()),
    "tanh": (_TANH, ("exp",)),
    "tan": (_TAN, ("sin",)),
    "sinh": (_HYPERBOLIC, ("exp",)),
    "cosh": (_HYPERBOLIC, ("exp",)),
    "asinh": (_LOG1P, ("log",)),
    "acosh": (_LOG1P, ("log",)),
    "atanh": (_LOG1P, ("log",)),
    "atan": (_ATAN, ()),
    "pow": (_POW, ("exp", "log")),
    "erf": (_ERF, ("exp",)),
}


def prelude(used: set[str]) -> list[str]:
    """The WGSL source of the functions in ``used`` and of those they call, each once."""
    needed = set(used)
    for fn in used:
        needed.update(FUNCTIONS[fn][1])
    sources = dict.fromkeys(FUNCTIONS[fn][0] for fn in sorted(needed))
    return [_COMMON, *sources] if sources else []
