"""Read models and vector collections, derived from the event log and rebuildable from it."""
