"""Every construct renders in every dialect, and the output compiles.

The C dialects are checked twice where the tools exist: OpenCL C by a real OpenCL compiler
(pyopencl with any platform, e.g. Debian's PoCL), and both OpenCL C and CUDA C by
``gcc``/``g++ -fsyntax-only`` after a prelude that maps each dialect's keywords, types and
builtins to plain C/C++ (a syntax and type check, not a device compile). CUDA C is also
compiled to PTX by NVRTC from NVIDIA's PyPI wheels (``nvidia-cuda-nvrtc-cu12``, with
``cuda_fp16.h`` from ``nvidia-cuda-runtime-cu12``), which needs no GPU. WGSL is checked by
wgpu's shader module creation (naga) when wgpu finds an adapter (e.g. Mesa's lavapipe).
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from spawnml.kernel import (
    Buffer,
    Const,
    ReadBuffer,
    Scalar,
    atomic_add,
    barrier,
    cos,
    erf,
    exp,
    f16,
    f32,
    f64,
    floor,
    global_id,
    group_id,
    i32,
    kernel,
    local_id,
    log,
    pow,
    rsqrt,
    select,
    shared,
    sin,
    sqrt,
    tanh,
    u32,
)
from spawnml.kernel.lang import T
from spawnml.kernel.library import (
    add,
    attention,
    batched_matmul,
    bfloat16,
    conv,
    dft,
    forest,
    gguf,
    grid_sample,
    linalg,
    linear_attention,
    matmul,
    mel,
    movement,
    narrow,
    norm,
    pad,
    pool,
    regions,
    remainder,
    resize,
    rows,
    selection,
    sum_partial,
    topk,
)
from spawnml.kernel.library import map as maps
from spawnml.kernel.render import CUDARenderer, OpenCLRenderer, WGSLRenderer
from spawnml.kernel.split import split_buffers


@kernel(workgroup=("WG",))
def every_construct(
    x: ReadBuffer[T],
    y: Buffer[T],
    counts: Buffer[u32],
    n: u32,
    bias: i32,
    T: Const[Scalar],
    WG: Const[int],
    SCALE: Const[float],
):
    """Exercises every statement, operator and intrinsic of the kernel language once."""
    tile = shared(T, WG * 2)
    i = global_id(0)
    lid = local_id(0)
    if i >= n:
        return
    v = x[i]
    tile[lid] = v
    barrier()
    w: f32 = f32(tile[(lid + 1) % u32(WG)]) * SCALE
    w = exp(w) + log(abs(w) + 1.0) + sqrt(abs(w)) + rsqrt(w * w + 1.0) + tanh(w) + erf(w)
    w = w + sin(w) * cos(w) - floor(w) + pow(abs(w), 0.5) + min(w, 1.0) + max(w, -1.0) + w**2
    k = i32(i) - bias
    k = (k * 3 // 2) % 7 + abs(k) + min(k, 2) + max(k, -2)
    bits = (i & 7) | (i ^ 3) | (i << 2) | (i >> u32(1)) | ~i
    for j in range(3, 0, -1):
        if j == 2:
            continue
        k += j
    done = False
    while (k > 100 or k < -100) and not done:
        k = k // 2
        done = k == 7
        if k == 1:
            break
    flag = 0 < k <= 50 and bits != 0
    w = select(flag, w, -w) + (1.5 if k > 0 else 2.5) + f32(bool(bits))
    old = atomic_add(counts, group_id(0), 1)
    atomic_add(counts, u32(WG), old + 1)
    y[i] = T(w) + v


DIALECTS = [OpenCLRenderer(), CUDARenderer(), WGSLRenderer()]
#: Window constants of the convolution and pooling kernels: sizes, strides, dilations per axis.
WINDOW = {"KD": 1, "KH": 3, "KW": 2, "SD": 1, "SH": 2, "SW": 1, "DD": 1, "DH": 1, "DW": 2}
KERNELS = {
    "add": add.specialize(T=f32),
    "sum_partial": sum_partial.specialize(T=f32, BLOCK=64),
    "matmul": matmul.specialize(T=f32, TILE=8),
    "every_construct": every_construct.specialize(T=f32, WG=32, SCALE=0.5),
    "every_construct_f16": every_construct.specialize(T=f16, WG=32, SCALE=0.5),
    "every_construct_f64": every_construct.specialize(T=f64, WG=32, SCALE=0.5),
    "matmul_i32": matmul.specialize(T=i32, TILE=4),
    "batched_matmul_tiled": batched_matmul.batched_matmul(f32, batched_matmul.TILED),
    "batched_matmul_direct_i32": batched_matmul.batched_matmul(i32, batched_matmul.DIRECT.fitted(20, 3)),
    "softmax_rows": rows.softmax_rows.specialize(T=f32),
    "softmax_rows_f64": rows.softmax_rows.specialize(T=f64),
    "layernorm_rows": rows.layernorm_rows.specialize(T=f32, CENTERED=True),
    "rmsnorm_rows": rows.layernorm_rows.specialize(T=f32, CENTERED=False),
    "attention_softmax": attention.attention_softmax.specialize(T=f32),
    "rotary_embedding": attention.rotary_embedding.specialize(T=f32),
    "linear_attention_scan": linear_attention.linear_attention_scan.specialize(
        T=f32, PAST=True, GATED=True, DELTA=True
    ),
    "top_k": topk.top_k.specialize(T=f32, LARGEST=True),
    "round_to_bfloat16": bfloat16.round_to_bfloat16.specialize(T=i32),
    "round_to_float8_e4m3fn": narrow.round_to_float(narrow.FORMATS["float8_e4m3fn"], f32),
    "round_i32_to_float4_e2m1fn": narrow.round_to_float(narrow.FORMATS["float4_e2m1fn"], i32),
    "wrap_to_int4": narrow.wrap_to_int(4, True, i32),
    "wrap_float_to_uint2": narrow.wrap_to_int(2, False, f32),
    "round_float_to_int4": narrow.wrap_to_int(4, True, f32, round_even=True),
    "grid_taps": grid_sample.grid_taps.specialize(
        T=f32, MODE=grid_sample.CUBIC, PADDING=grid_sample.REFLECTION, ALIGN=False, TAPS_PER_AXIS=4
    ),
    "gather_taps": grid_sample.gather_taps.specialize(T=f32, TAPS_PER_AXIS=2, VOLUME=True),
    "float_mod": remainder.float_mod.specialize(T=f32, LARGEST=3.4028234663852886e38, RANK=3, FMOD=False),
    "float_mod_f64": remainder.float_mod.specialize(T=f64, LARGEST=1.7976931348623157e308, RANK=3, FMOD=True),
    "integer_power": remainder.integer_power.specialize(RANK=2),
    "determinant": linalg.determinant.specialize(T=f32),
    "dft": dft.dft.specialize(T=f32, INVERSE=True, HALF=True),
    "bottom_k_i32": topk.top_k.specialize(T=i32, LARGEST=False),
    "strided_copy": movement.strided_copy.specialize(T=f32, RANK=3),
    "gather": movement.gather.specialize(T=f32),
    "reverse_sequence": movement.reverse_sequence.specialize(T=i32),
    "col2im": movement.col2im.specialize(T=f32, RANK=2),
    "map1": maps.map1.specialize(T=f32, R=f32),
    "map2": maps.map2.specialize(T=f32, R=i32, RANK=3),
    "map3": maps.map3.specialize(T=f32, RANK=3),
    "running_offsets": selection.running_offsets.specialize(),
    "count_nonzero": selection.count_nonzero.specialize(T=f32, BLOCK=256),
    "nonzero_coordinates": selection.nonzero_coordinates.specialize(T=i32, BLOCK=256, RANK=3),
    "unique_first": selection.unique_first.specialize(T=f32, NANS=True),
    "unique_place": selection.unique_place.specialize(T=i32, SORTED=True, NANS=False),
    "box_corners": selection.box_corners.specialize(CENTER=True),
    "score_order": selection.score_order.specialize(),
    "nms_select": selection.nms_select.specialize(FLOOR=True),
    "nms_triples": selection.nms_triples.specialize(),
    "roi_align": regions.roi_align.specialize(T=f32, MAX=True, HALF_PIXEL=False),
    "roi_align_f64": regions.roi_align.specialize(T=f64, MAX=False, HALF_PIXEL=True),
    "forest_leaves_f64": forest.forest_leaves.specialize(T=f64),
    "mel_weights": mel.mel_weights.specialize(T=i32, W=f32),
    "forest_leaves": forest.forest_leaves.specialize(T=f32),
    "forest_scores": forest.forest_scores.specialize(T=f32, AGGREGATE=3),
    **{f"gguf_matmul_{t.lower()}": gguf.block_kernel(t, False) for t in ("Q5_1", "Q8_0", "Q5_K", "Q6_K")},
    **{f"gguf_gather_{t.lower()}": gguf.block_kernel(t, True) for t in ("Q4_0", "Q4_K", "Q6_K")},
    **{
        f"{k.name}_vision": k
        for k in (
            conv.conv_direct.specialize(T=f32, **WINDOW),
            conv.conv_gemm.specialize(T=f32, TILE=8, **WINDOW),
            conv.conv_transpose.specialize(T=f32, **WINDOW),
            pool.max_pool.specialize(T=i32, INDICES=True, COLUMN_MAJOR=True, **WINDOW),
            pool.average_pool.specialize(T=f32, INCLUDE_PAD=True, **WINDOW),
            pool.lp_pool.specialize(T=f32, P=3, **WINDOW),
            pool.global_pool.specialize(T=f32, BLOCK=32, AVERAGE=True),
            norm.batch_norm.specialize(T=f32),
            norm.group_norm.specialize(T=f32, BLOCK=32),
            norm.local_response_norm.specialize(T=f32),
            resize.resample_axis.specialize(T=f32, TAPS=2),
            pad.pad.specialize(T=f32, RANK=3, MODE=pad.REFLECT),
            regions.deform_conv.specialize(
                T=f32, MASK=True, **{k: v for k, v in WINDOW.items() if k[1] in "HW"}
            ),
        )
    },
    # Buffers bound in parts (spawnml.kernel.split): loads select among clamped parts, stores branch.
    "matmul_split": split_buffers(matmul.specialize(T=f32, TILE=8), {"a": (3, 256), "c": (2, 4096)}),
    "conv_direct_split": split_buffers(conv.conv_direct.specialize(T=f32, **WINDOW), {"x": (4, 1024)}),
}

EXPECTED = {
    "OpenCLRenderer": [
        "__kernel void __attribute__((reqd_work_group_size(32, 1, 1))) every_construct(",
        "__global const float* restrict x",
        "__local float tile[64];",
        "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);",
        "atomic_add(&counts[((uint)get_group_id(0))], 1u)",
        "for (int j = 3; j > 0; j -= 1) {",
        "rsqrt(",
        "erf(",
        "((int)(abs(k)))",
    ],
    "CUDARenderer": [
        'extern "C" __global__ void __launch_bounds__(32) every_construct(',
        "const float* __restrict__ x",
        "__shared__ float tile[64];",
        "__syncthreads();",
        "atomicAdd(&counts[blockIdx.x], 1u)",
        "(blockIdx.x * blockDim.x + threadIdx.x)",
        "rsqrtf(",
        "erff(",
    ],
    "WGSLRenderer": [
        "@group(0) @binding(0) var<storage, read> x: array<f32>;",
        "@group(0) @binding(2) var<storage, read_write> counts: array<atomic<u32>>;",
        "struct SpawnScalars { n: u32, bias: i32, }",
        "@group(0) @binding(3) var<uniform> spawn_scalars: SpawnScalars;",
        "var<workgroup> tile: array<f32, 64>;",
        "@compute @workgroup_size(32, 1, 1)",
        "workgroupBarrier();",
        "atomicAdd(&counts[spawn_wid.x], 1u)",
        "for (var j: i32 = 3i; j > 0i; j -= 1i) {",
        "inverseSqrt(",
        "fn spawn_erf_f32(x: f32) -> f32 {",
        "spawn_erf_f32(",
        "select(",
        "(i >> 1u)",
    ],
}


@pytest.mark.parametrize("renderer", DIALECTS, ids=lambda r: type(r).__name__)
def test_every_construct_renders_with_the_dialects_spelling(renderer):
    source = renderer.render(KERNELS["every_construct"])
    for fragment in EXPECTED[type(renderer).__name__]:
        assert fragment in source, f"{fragment!r} missing from\n{source}"


def test_f16_enables_half_support():
    k = KERNELS["every_construct_f16"]
    assert OpenCLRenderer().render(k).startswith("#pragma OPENCL EXTENSION cl_khr_fp16 : enable")
    assert CUDARenderer().render(k).startswith("#include <cuda_fp16.h>")
    assert WGSLRenderer().render(k).startswith("enable f16;")
    assert "((__half)(" in CUDARenderer().render(k)


_OPENCL_AS_C = """
#include <math.h>
#include <stdbool.h>
typedef unsigned int uint;
typedef _Float16 half;
#define __kernel
#define __global
#define __local static
#define CLK_LOCAL_MEM_FENCE 1
#define CLK_GLOBAL_MEM_FENCE 2
uint get_global_id(uint); uint get_local_id(uint); uint get_group_id(uint);
void barrier(int);
float rsqrt(float);
#define atomic_add(p, v) (*(p) += (v))
#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))
#define abs(a) ((a) < 0 ? -(a) : (a))
"""

_CUDA_AS_CPP = """
#include <math.h>
#include <stdlib.h>
typedef _Float16 __half;
#define __global__
#define __shared__ static
#define __launch_bounds__(n)
struct SpawnDim { unsigned int x, y, z; };
extern SpawnDim threadIdx, blockIdx, blockDim;
void __syncthreads();
template <class T> T atomicAdd(T* p, T v) { T old = *p; *p += v; return old; }
template <class T> T min(T a, T b) { return a < b ? a : b; }
template <class T> T max(T a, T b) { return a > b ? a : b; }
float rsqrtf(float);
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize(
    ("renderer", "compiler", "prelude"),
    [
        (OpenCLRenderer(), ["gcc", "-x", "c", "-std=c11"], _OPENCL_AS_C),
        (CUDARenderer(), ["g++", "-x", "c++"], _CUDA_AS_CPP),
    ],
    ids=["opencl", "cuda"],
)
def test_c_dialects_pass_a_gcc_syntax_check(tmp_path, name, renderer, compiler, prelude):
    source = renderer.render(KERNELS[name]).replace("#include <cuda_fp16.h>", "")
    source = re.sub(r"#pragma OPENCL EXTENSION \w+ : enable", "", source)
    flags = [
        "-fsyntax-only",
        "-Wall",
        "-Werror",
        "-Wno-attributes",
        "-Wno-unused-variable",
        "-Wno-unused-but-set-variable",
    ]
    result = subprocess.run([*compiler, *flags, "-"], input=prelude + source, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr + source


def _opencl_context():
    import pyopencl as cl

    try:
        return cl, cl.create_some_context(interactive=False)
    except cl.Error as e:
        pytest.skip(f"no OpenCL platform: {e}")


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_opencl_compiles_with_a_real_compiler(name):
    cl, ctx = _opencl_context()
    kernel_ir = KERNELS[name]
    for half, extension in (("f16", "cl_khr_fp16"), ("f64", "cl_khr_fp64")):
        if half in name and extension not in ctx.devices[0].extensions:
            pytest.skip(f"the OpenCL device lacks {extension}")
    program = cl.Program(ctx, OpenCLRenderer().render(kernel_ir)).build()
    assert getattr(program, kernel_ir.name).num_args == len(kernel_ir.params)


def _wgpu_device():
    import wgpu

    adapter = wgpu.gpu.request_adapter_sync()
    if adapter is None:
        pytest.skip("wgpu found no adapter (install Mesa's lavapipe: mesa-vulkan-drivers)")
    return adapter.request_device_sync(required_features=sorted({"shader-f64"} & set(adapter.features)))


@pytest.mark.parametrize("name", [n for n in sorted(KERNELS) if "f16" not in n])
def test_wgsl_passes_naga_validation(name):
    device = _wgpu_device()
    if "f64" in name and "shader-f64" not in device.features:
        pytest.skip("the adapter lacks shader-f64")
    device.create_shader_module(code=WGSLRenderer().render(KERNELS[name]))


def _nvrtc() -> tuple[ctypes.CDLL, list[bytes]]:
    """NVIDIA's runtime compiler from its PyPI wheel (no GPU needed), and the flags to compile with."""
    import nvidia.cuda_nvrtc as nvrtc
    import nvidia.cuda_runtime as runtime

    library = ctypes.CDLL(str(Path(next(iter(nvrtc.__path__))) / "lib" / "libnvrtc.so.12"))
    include = Path(next(iter(runtime.__path__))) / "include"  # cuda_fp16.h
    return library, [b"--gpu-architecture=compute_75", b"-I" + str(include).encode()]


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_cuda_compiles_with_nvrtc(name):
    library, flags = _nvrtc()
    kernel_ir = KERNELS[name]
    program = ctypes.c_void_p()
    source = CUDARenderer().render(kernel_ir).encode()
    assert library.nvrtcCreateProgram(ctypes.byref(program), source, b"kernel.cu", 0, None, None) == 0
    try:
        status = library.nvrtcCompileProgram(program, len(flags), (ctypes.c_char_p * len(flags))(*flags))
        size = ctypes.c_size_t()
        library.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        library.nvrtcGetProgramLog(program, log)
    finally:
        library.nvrtcDestroyProgram(ctypes.byref(program))
    assert status == 0, log.value.decode() + source.decode()
