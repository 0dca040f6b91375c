"""The kernel table every GPU backend shares, filled by the kernel modules on first lookup."""

from __future__ import annotations

from ..backend import KernelTable

#: The modules whose import registers kernels on :data:`GPU_KERNELS` (``table`` registers the
#: elementwise ones). Imported when a GPU backend first looks a kernel up, not when the backends
#: are discovered: they import the whole kernel library.
KERNEL_MODULES = tuple(
    f"{__package__}.{name}"
    for name in (
        "table",
        "attention",
        "control",
        "einsum",
        "flex_attention",
        "forest",
        "fused",
        "gemm",
        "gguf",
        "indexing",
        "layout",
        "linalg",
        "linear_attention",
        "loss",
        "mel",
        "ml",
        "quant",
        "quant_contrib",
        "quant_conv",
        "recurrent",
        "reduce",
        "regions",
        "sampling",
        "selection",
        "sequence",
        "signal",
        "train",
        "unary",
        "vision",
    )
)

GPU_KERNELS = KernelTable(modules=KERNEL_MODULES)

#: Why the GPU backends have no kernel for an operator, where that is worth saying: added to the
#: refusal, ``(domain, operator) -> reason``.
NOT_ON_GPU = {
    ("com.microsoft", "QAttention"): (
        "its heads are com.microsoft Attention's (packed Q/K/V, mask_index, a 5-D past), which the "
        "GPU backends do not run; list the cpu provider after this one to run it there"
    ),
}
