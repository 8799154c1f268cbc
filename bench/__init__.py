"""Benchmarks of the product beside a typical Channels app, run by `python -m bench.run`."""
