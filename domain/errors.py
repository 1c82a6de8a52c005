"""Domain errors: each one names the rule that was broken."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """Base of every error the domain raises on purpose."""

    code = "domain_error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class InvalidInput(DomainError, ValueError):
    """Input that can never become valid state (bad field, bad range)."""

    code = "invalid_input"


class InvalidScene(InvalidInput):
    """A structured scene (a JSON object) that breaks the scene schema."""

    code = "invalid_scene"

    def __init__(self, message: str, errors: list[dict[str, Any]]) -> None:
        super().__init__(message, errors=errors)
        self.errors = errors


class PayloadTooLarge(InvalidInput):
    code = "payload_too_large"


class InvariantViolation(DomainError):
    """A command that is well-formed but not allowed in the current state."""

    code = "invariant_violation"


class PinnedNodeCannotDie(InvariantViolation):
    code = "pinned_node_cannot_die"


class NodeNotDecayed(InvariantViolation):
    code = "node_not_decayed"


class DeadNodeCannotBeAbsorbed(InvariantViolation):
    code = "dead_node_cannot_be_absorbed"


class RootClusterImmutable(InvariantViolation):
    code = "root_cluster_immutable"


class ClusterDeleted(InvariantViolation):
    code = "cluster_deleted"


class CrossBeingReference(InvariantViolation):
    code = "cross_being_reference"


class EmbeddingMismatch(InvariantViolation):
    code = "embedding_mismatch"


class InvalidTransition(InvariantViolation):
    """A status change that the lifecycle does not allow (e.g. revive an active node)."""

    code = "invalid_transition"
