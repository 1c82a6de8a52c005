"""Adapters: everything that talks to the outside world."""
