"""Benchmark harnesses driven by `engram bench` (adapters/cli/bench_cmds.py).

`locomo` reads a file in LoCoMo's format (conversations, sessions, turns, questions with evidence),
`metrics` scores ranked hits against evidence, `run_locomo` ingests and queries through the public
services, `report` renders the figures.
"""
