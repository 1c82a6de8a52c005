"""`engram demo`: a being, a realistic set of scenes, and what the log made of them.

Re-running it is safe: every demo note carries an idempotency key.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from typing import Any

import click

from engram.adapters.cli.output import NO_LLM, plain_reason
from engram.services.commands import NoteInput
from engram.services.errors import DuplicateBeing

DEMO_BEING = "Aria"
DEMO_SOUL = (
    "Aria is an engineering lead in her thirties: curious, warm, dry-humoured. "
    "She climbs, bakes badly, and keeps close to her mother."
)


def _demo_scenes() -> list[str]:
    text = resources.files("engram.adapters.cli").joinpath("demo_scenes.jsonl").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip()]


def cluster_tree(engram: Any, being_id: str) -> list[str]:
    """Roots, their sub-clusters and a few member actions, as indented lines."""
    from uuid import UUID

    read = engram.views.read
    clusters = read.clusters(UUID(being_id))
    lines: list[str] = []

    def show(cluster: dict[str, Any], depth: int) -> None:
        pad = "  " * depth
        lines.append(
            f"{pad}{cluster['name']}  ({cluster['active_count']} active / {cluster['total_count']} nodes)"
        )
        for node in read.nodes(UUID(being_id), cluster_id=UUID(cluster["id"]), limit=4):
            lines.append(f"{pad}    · {node['action'][:70]}")
        for child in clusters:
            if child["parent_id"] == cluster["id"] and child["id"] != cluster["id"]:
                show(child, depth + 1)

    for root in (c for c in clusters if c["is_root"]):
        show(root, 1)
    return lines


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    @cli.command("demo")
    @command
    def demo(ctx: Any, *, as_json: bool) -> None:
        """Create a being, note a bundled set of scenes, and show its history."""
        engram = ctx.engram
        say: Callable[[str], None] = (lambda _m: None) if as_json else click.echo
        try:
            created = engram.beings.register(DEMO_BEING)
            say(f"created being {DEMO_BEING} ({created.being_id})")
        except DuplicateBeing:
            say(f"being {DEMO_BEING} exists already; notes below are idempotent")
        engram.beings.define_soul(DEMO_BEING, DEMO_SOUL)

        notes = [
            NoteInput(text=s, idempotency_key=f"demo-scene-{i}", source_ref=f"demo:{i}")
            for i, s in enumerate(_demo_scenes(), 1)
        ]
        notes += [
            NoteInput(
                text="had coffee with Lena, she is moving to Lisbon in spring — feel a bit lost",
                idempotency_key="demo-prose",
            ),
            NoteInput(
                kind="todo", text="Book the dentist for the filling in December", idempotency_key="demo-todo"
            ),
            NoteInput(
                kind="rule",
                text="Never schedule meetings before 9:30",
                evidence=["said so twice when early calls were booked"],
                idempotency_key="demo-rule",
            ),
            NoteInput(
                kind="relationship", text="Lena: closest friend, climbing partner", idempotency_key="demo-rel"
            ),
        ]
        taken = engram.notes.take_many(DEMO_BEING, notes)
        fresh = [n for n in taken.notes if not n.duplicate]
        failed = [n for n in taken.notes if n.parsed is False]
        say(
            f"noted {len(fresh)} new note(s) ({len(taken.notes) - len(fresh)} already there), "
            f"{len(failed)} kept for repair because they did not parse as scenes"
        )

        first = taken.notes[0]
        history = engram.audit.history("note", first.note_id)
        say(f"\nhistory of note {first.note_id}:")
        for e in history:
            say(f"  v{e['version']} {e['timestamp']} {e['type']}")
        recent = engram.audit.log(being=DEMO_BEING, limit=10_000)[-8:]
        say(f"\nlast {len(recent)} events of {DEMO_BEING} in the log:")
        for e in recent:
            say(f"  #{e['position']:<5} {e['type']:<28} {e['aggregate_id']}")
        report = engram.patrol(DEMO_BEING)
        say(f"\npatrol, cycle {report.cycle} (LLM: {report.llm or NO_LLM}):")
        for step in report.steps:
            counts = ", ".join(f"{k} {v}" for k, v in (step.get("counts") or {}).items())
            reason = plain_reason(step["reason"]) if step.get("reason") else ""
            say(f"  {step['step']:<18} {step.get('state', '')} {counts or reason}")
        being_id = engram.views.read.being_by_name(DEMO_BEING)["id"]
        tree = cluster_tree(engram, being_id)
        say("\nclusters:")
        for line in tree:
            say(line)
        recalled = engram.reading.recall(DEMO_BEING, "climbing with Lena")
        say(f'\nrecall "climbing with Lena" (reactivates {len(recalled.nodes)} node(s)):')
        say(f"  {recalled.text or '(nothing)'}")
        question = "what went wrong with the Atlas cutover?"
        found = engram.reading.query(DEMO_BEING, question, 3, reactivate=False)
        say(f'\nquery "{question}":')
        for hit in found.nodes:
            say(f"  {hit.score:.4f}  {hit.action[:80]}")
        context = engram.reading.context(DEMO_BEING)
        say("\ncontext (first lines):")
        for line in context.text.splitlines()[:12]:
            say(f"  {line}")
        say(
            "\nnext: engram context Aria · engram history being Aria · engram projections status · engram serve"
        )
        if as_json:
            from engram.adapters.cli.output import emit_json

            emit_json(
                {
                    "being": DEMO_BEING,
                    "notes": [n.model_dump() for n in taken.notes],
                    "history": history,
                    "recent_log": recent,
                }
            )
