"""The WebGPU runtime over wgpu-py: buffers, a pipeline per WGSL source, batched dispatches."""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from spawnml.errors import DeviceMemoryError
from spawnml.gpu import Runtime

#: The adapter limits the device is opened with (the defaults are far below what adapters offer).
LIMITS = (
    "max-buffer-size",
    "max-storage-buffer-binding-size",
    "max-storage-buffers-per-shader-stage",
    "max-compute-workgroups-per-dimension",
)
#: Dispatches recorded before the command encoder is submitted.
BATCH = 128
#: Distinct uniform buffers (packed scalars) kept; past it, the longest unused go.
UNIFORMS = 4096
#: A binding as the WGSL renderer declares it: its number and address space.
BINDING = re.compile(r"@group\(0\) @binding\((\d+)\) var<(uniform|storage, read_write|storage, read)>")


class WebGPURuntime(Runtime):
    """One wgpu device: dispatches go into one command encoder until a copy or the batch flushes it.

    Every call into wgpu holds :attr:`lock`, so threads share the encoder in turn; wgpu errors
    saying the device is lost become :class:`~spawnml.errors.DeviceLostError`, out-of-memory
    errors :class:`~spawnml.errors.DeviceMemoryError`.
    """

    def __init__(self, adapter: Any) -> None:
        import wgpu

        super().__init__()
        self.wgpu, self.adapter = wgpu, adapter
        self.float64 = "shader-f64" in adapter.features  # a native feature of wgpu, off the WebGPU spec
        self.on_cpu = adapter.info["adapter_type"] == "CPU"
        self.device = adapter.request_device_sync(
            required_features=["shader-f64"] if self.float64 else [],
            required_limits={k: adapter.limits[k] for k in LIMITS},
        )
        self.limits = self.device.limits
        self._encoder: Any = None
        self._pending = 0
        self._uniforms: OrderedDict[bytes, Any] = OrderedDict()

    def describe(self) -> str:
        info = self.adapter.info
        return f"{info['device']} ({info['adapter_type']} adapter, {info['backend_type']})"

    @property
    def max_groups(self) -> int:
        return int(self.limits["max-compute-workgroups-per-dimension"])

    @property
    def max_buffer_bytes(self) -> int:
        return int(min(self.limits["max-storage-buffer-binding-size"], self.limits["max-buffer-size"]))

    @property
    def max_alloc_bytes(self) -> int:
        return int(self.limits["max-buffer-size"])

    @property
    def max_bindings(self) -> int:
        return int(self.limits["max-storage-buffers-per-shader-stage"])

    @property
    def window_alignment(self) -> int:
        return int(self.limits["min-storage-buffer-offset-alignment"])

    def window(self, handle: Any, offset: int, nbytes: int) -> Any:
        return {"buffer": handle, "offset": offset, "size": nbytes}

    @contextmanager
    def _calls(self) -> Iterator[None]:
        """Hold the lock around wgpu calls and translate the device's failures."""
        with self.lock:
            self.check_alive()
            try:
                yield
            except self.wgpu.GPUOutOfMemoryError as error:
                raise DeviceMemoryError(f"out of memory: {error}") from error
            except self.wgpu.GPUError as error:
                if "lost" in str(error).lower():
                    self._encoder, self._pending = None, 0
                    raise self.lose(str(error).strip().splitlines()[-1].strip()) from error
                raise

    def _alloc(self, size: int) -> Any:
        usage = self.wgpu.BufferUsage
        with self._calls():
            return self.device.create_buffer(size=size, usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST)

    def copy_in(self, handle: Any, data: np.ndarray) -> None:
        with self._calls():
            self.flush()
            self.device.queue.write_buffer(handle, 0, data)

    def copy_out(self, handle: Any, nbytes: int) -> bytes:
        with self._calls():
            self.flush()
            return bytes(self.device.queue.read_buffer(handle, 0, nbytes))

    def compile(self, source: str, name: str) -> Any:
        # The layout comes from the declared bindings, not from what the shader reads (wgpu's
        # "auto"): a buffer that a kernel's specialization never reads (a branch folded away on a
        # constant) keeps its binding, so that launches bind every buffer in parameter order.
        kinds = {
            "uniform": self.wgpu.BufferBindingType.uniform,
            "storage, read": self.wgpu.BufferBindingType.read_only_storage,
            "storage, read_write": self.wgpu.BufferBindingType.storage,
        }
        compute = self.wgpu.ShaderStage.COMPUTE
        entries = [
            {"binding": int(binding), "visibility": compute, "buffer": {"type": kinds[kind]}}
            for binding, kind in BINDING.findall(source)
        ]
        with self._calls():
            module = self.device.create_shader_module(code=source)
            layout = self.device.create_bind_group_layout(entries=entries)
            pipeline = self.device.create_compute_pipeline(
                layout=self.device.create_pipeline_layout(bind_group_layouts=[layout]),
                compute={"module": module, "entry_point": name},
            )
            return pipeline, layout

    def launch(
        self, program: Any, buffers: Sequence[Any], grid: tuple[int, int, int], scalars: Sequence[np.generic]
    ) -> None:
        pipeline, layout = program
        with self._calls():
            bound = (
                [*buffers, self._uniform(b"".join(s.tobytes() for s in scalars))]
                if scalars
                else list(buffers)
            )
            entries = [
                {
                    "binding": i,
                    "resource": b if isinstance(b, dict) else {"buffer": b, "offset": 0, "size": b.size},
                }
                for i, b in enumerate(bound)
            ]
            group = self.device.create_bind_group(layout=layout, entries=entries)
            if self._encoder is None:
                self._encoder = self.device.create_command_encoder()
            compute = self._encoder.begin_compute_pass()
            compute.set_pipeline(pipeline)
            compute.set_bind_group(0, group)
            compute.dispatch_workgroups(*grid)
            compute.end()
            self._pending += 1
            if self._pending >= BATCH:
                self.flush()

    def flush(self) -> None:
        """Submit the recorded dispatches."""
        with self.lock:
            if self._encoder is not None:
                encoder, self._encoder, self._pending = self._encoder, None, 0
                self.device.queue.submit([encoder.finish()])

    def simulate_loss(self) -> None:
        """Destroy the device: wgpu then reports it lost on the next call, as after a driver reset."""
        self.device.destroy()

    def _uniform(self, packed: bytes) -> Any:
        """A uniform buffer holding ``packed`` (padded to 16 bytes), one per distinct content."""
        found = self._uniforms.get(packed)
        if found is None:
            data = packed + bytes(-len(packed) % 16)
            usage = self.wgpu.BufferUsage.UNIFORM
            found = self._uniforms[packed] = self.device.create_buffer_with_data(data=data, usage=usage)
            if len(self._uniforms) > UNIFORMS:
                self._uniforms.popitem(last=False)
        else:
            self._uniforms.move_to_end(packed)
        return found
