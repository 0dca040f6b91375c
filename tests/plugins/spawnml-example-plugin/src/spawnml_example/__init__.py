"""An example third-party SpawnML plugin: the Swish operator, the ``example`` backend, ``.exgraph`` files."""
