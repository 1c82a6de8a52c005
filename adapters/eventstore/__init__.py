"""The event log: the `eventsourcing` application on SQLite or PostgreSQL."""

from engram.adapters.eventstore.event_log import EventLog, event_log_env, open_event_log

__all__ = ["EventLog", "event_log_env", "open_event_log"]
