"""Commands on beings, and resolving a being by name or id."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from engram.domain.being import Being
from engram.domain.erasure import ContentErased
from engram.domain.ids import being_id_for_name
from engram.domain.text import check_text
from engram.services.commands import BeingRegistered, Done
from engram.services.errors import DuplicateBeing, NotFound, WriteRaced
from engram.services.ports import Clock
from engram.services.runner import CommandRunner
from engram.services.store import AggregateStore


def parse_uuid(value: str) -> UUID | None:
    try:
        return UUID(value)
    except (ValueError, AttributeError, TypeError):
        return None


def resolve_being(store: AggregateStore, ref: str | UUID) -> Being:
    """A being by id or by name. Unknown refs raise `NotFound`."""
    if isinstance(ref, UUID):
        return store.get(Being, ref)
    check_text("being", ref)  # a name no store could keep has no id either
    as_id = parse_uuid(ref)
    if as_id is not None:
        try:
            found = store.find(Being, as_id)
        except ContentErased:
            raise NotFound(f"being {ref!r} was forgotten") from None
        if found is not None:
            return found
    try:
        return store.get(Being, being_id_for_name(ref))
    except NotFound:
        raise NotFound(f"being {ref!r} not found") from None
    except ContentErased:  # its key was destroyed (ADR 0073)
        raise NotFound(f"being {ref!r} was forgotten") from None


def list_beings(store: AggregateStore) -> list[dict[str, Any]]:
    """Every registered being, in registration order, read from the log (#3 adds a read model)."""
    out = []
    for notification in store.iter_notifications(topics=[str(Being.Registered.TOPIC)]):
        try:
            being = store.get(Being, UUID(str(notification.originator_id)))
        except ContentErased:  # a forgotten being (ADR 0073)
            continue
        out.append({**being.summary(), "registered_at": being.created_on.isoformat()})
    return out


def resolve_being_id(store: AggregateStore, ref: str | UUID) -> UUID:
    """A being's id by id or name, remembered per store: names and ids never change and beings are
    never deleted, so after the first lookup a command needs no round trip to find its being."""
    key = str(ref)
    cached = store.known_beings.get(key)
    if cached is None:
        cached = UUID(str(resolve_being(store, ref).id))
        store.known_beings[key] = cached
    return cached


class BeingCommands:
    def __init__(self, store: AggregateStore, clock: Clock, runner: CommandRunner) -> None:
        self.store = store
        self.clock = clock
        self.runner = runner

    def register(self, name: str) -> BeingRegistered:
        def handle() -> BeingRegistered:
            being, business, private = Being.register(name, self.clock.now())
            try:
                position = self.store.save(being, business, private)
            except WriteRaced:
                # The id derives from the name: a clash means the name is taken.
                raise DuplicateBeing(
                    f"a being named {being.name!r} already exists", name=being.name
                ) from None
            return BeingRegistered(
                being_id=str(being.id),
                name=being.name,
                roots={k: str(v) for k, v in being.root_ids.items()},
                position=position,
            )

        return self.runner.run("register_being", handle)

    def define_soul(self, being_ref: str, soul: str) -> Done:
        return self._update(being_ref, "define_soul", lambda b: b.define_soul(soul, self.clock.now()))

    def write_think_md(self, being_ref: str, think_md: str) -> Done:
        return self._update(
            being_ref, "write_think_md", lambda b: b.write_think_md(think_md, self.clock.now())
        )

    def write_diary(self, being_ref: str, date: str, text: str) -> Done:
        return self._update(being_ref, "write_diary", lambda b: b.write_diary(date, text, self.clock.now()))

    def set_sleep_window(self, being_ref: str, start_hour: int, duration_hours: int) -> Done:
        return self._update(
            being_ref,
            "set_sleep_window",
            lambda b: b.set_sleep_window(start_hour, duration_hours, self.clock.now()),
        )

    def clear_sleep_window(self, being_ref: str) -> Done:
        return self._update(being_ref, "clear_sleep_window", lambda b: b.clear_sleep_window(self.clock.now()))

    def set_sleep_schedule(self, being_ref: str, **changes: Any) -> Done:
        """Change fields of the being's sleep schedule (spec 003 §7, ADR 0060); the others stay.
        Fields: enabled, start_hour, duration_hours, min_awake_ticks, tick_awake_s, tick_asleep_s,
        cooldown_minutes, depth. Giving the window (start_hour or duration_hours) turns the schedule
        on unless `enabled` says otherwise. `details.schedule` is the schedule after the change."""
        from engram.domain.sleep import SleepSchedule

        if ("start_hour" in changes or "duration_hours" in changes) and "enabled" not in changes:
            changes["enabled"] = True

        def change(b: Being) -> None:
            b.set_sleep_schedule(SleepSchedule.from_dict({**b.sleep_schedule, **changes}), self.clock.now())

        being_id = resolve_being_id(self.store, being_ref)

        def handle() -> Done:
            being = self.store.get(Being, being_id)
            change(being)
            position = self.store.save(being) if being.pending_events else None
            return Done(position=position, details={"schedule": being.sleep_schedule})

        return self.runner.run("set_sleep_schedule", handle, being_id=being_id)

    def _update(self, being_ref: str, command: str, change: Callable[[Being], None]) -> Done:
        being_id = resolve_being_id(self.store, being_ref)

        def handle() -> Done:
            being = self.store.get(Being, being_id)
            change(being)
            return Done(position=self.store.save(being))

        return self.runner.run(command, handle, being_id=being_id)
