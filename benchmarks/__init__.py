"""Latency and throughput harnesses printing ratios against a baseline (`python -m benchmarks`)."""
