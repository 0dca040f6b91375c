import numpy as np
import spawnml
from spawnml import plugins
from spawnml_cpu import CPUBackend


def test_cpu_backend_registers_through_its_entry_point():
    plugins.reset()
    backend = plugins.backends()["cpu"]
    assert isinstance(backend, CPUBackend)
    assert backend.availability().available
    assert plugins.registry().plugins["cpu"].distribution == "spawnml-cpu"


def test_every_cpu_kernel_has_a_schema_in_force_where_the_kernel_is():
    """A kernel the planner can never reach (no schema) is dead code; find it."""
    operators = plugins.operators()
    for domain, op_type in CPUBackend.kernels.ops():
        assert operators.versions(domain, op_type), (
            f"{domain or 'ai.onnx'}::{op_type} has a kernel but no schema"
        )


def test_tensor_round_trip_through_dlpack_without_copy():
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    tensor = spawnml.Tensor.from_dlpack(array, device="cpu")
    assert tensor.shape == (3, 4) and tensor.device == "cpu"
    back = np.from_dlpack(tensor)
    assert np.shares_memory(back, array)
    np.testing.assert_array_equal(back, array)
