"""Commands on memory nodes that callers issue directly (patrol issues the rest, #4)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from uuid import UUID

from engram.domain.node import MemoryNode
from engram.services.beings import resolve_being_id
from engram.services.commands import Done
from engram.services.ports import Clock
from engram.services.runner import CommandRunner
from engram.services.store import AggregateStore


class NodeCommands:
    def __init__(self, store: AggregateStore, clock: Clock, runner: CommandRunner) -> None:
        self.store = store
        self.clock = clock
        self.runner = runner

    def pin(self, being_ref: str, node_id: UUID) -> Done:
        return self._update(being_ref, node_id, "pin_node", lambda n, at: n.pin(at))

    def unpin(self, being_ref: str, node_id: UUID) -> Done:
        return self._update(being_ref, node_id, "unpin_node", lambda n, at: n.unpin(at))

    def _update(
        self, being_ref: str, node_id: UUID, command: str, change: Callable[[MemoryNode, datetime], None]
    ) -> Done:
        being_id = resolve_being_id(self.store, being_ref)

        def handle() -> Done:
            node = self.store.get(MemoryNode, node_id, being_id=being_id)
            change(node, self.clock.now())
            return Done(
                position=self.store.save(node), details={"pinned": node.pinned, "status": node.status}
            )

        return self.runner.run(command, handle, being_id=being_id)
