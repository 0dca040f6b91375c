"""A SpawnML plugin adding ``org.trial::Mish`` with kernels for backends it does not own."""
