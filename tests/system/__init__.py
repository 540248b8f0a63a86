"""System tier: a real server, in-process over gRPC or as a process — transport limits, security, tenants,
metrics, the docs, packaging, the CLI, durability and robustness."""
