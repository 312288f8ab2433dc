"""The catalog: manifests, snapshots, schemas and their evolution, the change vocabulary, its transforms and the compare-and-swap commit loop (pure but for ``commit``)."""
