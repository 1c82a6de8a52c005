"""Spaces: creating them and changing their members (issue #11, ADR 0056). A space's facts are
written through `FactCommands` with `space=`."""

from __future__ import annotations

from collections.abc import Sequence

from engram.domain.errors import InvalidInput
from engram.domain.ids import space_id_for_name
from engram.domain.space import Space, check_space_name
from engram.services.beings import resolve_being_id
from engram.services.commands import Done
from engram.services.errors import Conflict, NotFound
from engram.services.ports import Clock
from engram.services.runner import CommandRunner
from engram.services.store import AggregateStore


class SpaceCommands:
    def __init__(self, store: AggregateStore, clock: Clock, runner: CommandRunner) -> None:
        self.store = store
        self.clock = clock
        self.runner = runner

    def create(self, name: str, beings: Sequence[str]) -> Done:
        """A space named `name` with `beings` (names or ids) as members. A name is unique: creating
        an existing space is a `conflict`."""
        name = check_space_name(name)
        if not beings:
            raise InvalidInput("a space has at least one member being", field="being")
        members = [resolve_being_id(self.store, b) for b in beings]
        space_id = space_id_for_name(name)

        def handle() -> Done:
            if self.store.find(Space, space_id) is not None:
                raise Conflict(f"a space named {name!r} exists already", field="space")
            space = Space.create(space_id, name, members, self.clock.now())
            return Done(position=self.store.save(space), details={"space_id": str(space_id), "name": name})

        return self.runner.run("create_space", handle)

    def _space(self, name: str) -> Space:
        found = self.store.find(Space, space_id_for_name(check_space_name(name)))
        if found is None:
            raise NotFound(f"no space named {name!r}")
        return found

    def join(self, name: str, being: str) -> Done:
        being_id = resolve_being_id(self.store, being)

        def handle() -> Done:
            space = self._space(name)
            space.join(being_id, self.clock.now())
            return Done(
                position=self.store.save(space), details={"space": space.name, "members": len(space.members)}
            )

        return self.runner.run("join_space", handle, being_id=being_id)

    def leave(self, name: str, being: str) -> Done:
        being_id = resolve_being_id(self.store, being)

        def handle() -> Done:
            space = self._space(name)
            space.leave(being_id, self.clock.now())
            return Done(
                position=self.store.save(space), details={"space": space.name, "members": len(space.members)}
            )

        return self.runner.run("leave_space", handle, being_id=being_id)
