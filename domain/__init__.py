"""Engram's domain: aggregates, events, value objects and policies.

Pure by design: nothing here performs I/O, reads a clock or draws random
numbers. Ids and instants come in as arguments from the application layer, so
that every event can be replayed exactly.
"""
