"""The opencl backend of SpawnML: not built yet.

Installing this distribution registers no backend; `spawnml plugins` lists the backends
that are available.
"""
