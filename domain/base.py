"""What every Engram aggregate shares.

Each event carries the `being_id` it belongs to, so that the global log can be
filtered by being and every projection can scope its rows without a lookup.
Event timestamps are always passed in by the application's clock.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate


class BeingScopedAggregate(Aggregate):
    being_id: UUID

    def _emit(self, event_class: type[Any], at: datetime, /, **fields: Any) -> None:
        self.trigger_event(event_class, being_id=self.being_id, timestamp=at, **fields)
