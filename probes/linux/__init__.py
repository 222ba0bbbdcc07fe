"""Linux probes: one module per source, each ``probe(host, profile)``."""
