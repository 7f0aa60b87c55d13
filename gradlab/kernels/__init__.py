"""Device kernels behind some bundled ops (optional: each module guards its own imports)."""
