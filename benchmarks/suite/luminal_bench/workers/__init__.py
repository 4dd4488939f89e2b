"""Peer engines, each run as `python3 -m luminal_bench.workers.NAME` in its own process."""
