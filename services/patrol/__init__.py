"""The patrol process manager (spec 000, "Patrol Pipeline")."""
