"""The solvers: plugin discovery and the registry, contract-checked hook calls, the numerical policy."""
