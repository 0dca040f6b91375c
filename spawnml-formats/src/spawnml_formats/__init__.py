"""SpawnML's model format loaders: each format lowers its files to the one graph IR."""
