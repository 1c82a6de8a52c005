"""The application: command handlers, queries, the patrol process manager and the composition root."""
