"""Query text a user may type never breaks a search or widens what it matches, on both backends.

Quotes, `*`, `NEAR(…)`, `OR`/`AND NOT`, column filters, `:`, parentheses and 4,000 characters reach
the full-text index only as the words they hold (`query_terms`, quoted by `adapters/fulltext/
patterns.py`); LIKE and GLOB wildcards in `search_memory` terms are characters to find; a NUL is a
clear error.
"""

from __future__ import annotations

import itertools
import string
from uuid import UUID, uuid4

import pytest

from engram.domain.being import Being
from engram.domain.cluster import Cluster
from engram.domain.errors import InvalidInput
from engram.domain.node import MemoryNode
from engram.domain.scene import SceneInput
from engram.services.bootstrap import Engram

CHESS = "Played chess by the river"
BREAD = "Baked bread near the harbour"
ODD = 'Wrote "100% [sure] a_b c*d" on a note? back\\slash, it\'s done'
ACTORS = "Read about actors and their stage names"
DOOR = "Greeted Mina at the door"

SCENES = {CHESS: ["me", "Mina"], BREAD: ["me", "Lena"], ODD: ["me"], ACTORS: ["me"], DOOR: ["me", "Tom"]}

LONG = " ".join(
    [p + a + b for p in "qz" for a, b in itertools.product(string.ascii_lowercase, repeat=2)][:990]
)
LONG += " chess"
"""3,965 characters: 990 distinct words that no memory holds, then one that one does."""

LEXICAL = {
    '"chess': {CHESS},
    'chess" OR "bread': {CHESS, BREAD},
    "*": set(),
    "ch*": set(),
    "NEAR(chess river)": {CHESS, BREAD},  # the words chess, river, near: not a NEAR group
    "chess AND NOT bread": {CHESS, BREAD},  # and, not: stop words; chess OR bread
    "action:chess": {CHESS},  # no column filter: the words action, chess
    "{action actors}: chess": {CHESS, ACTORS},
    "^chess": {CHESS},
    "(chess": {CHESS},
    "-bread": {BREAD},
    "it's": set(),  # it, s: stop words
    "!chess & bread <-> river:*": {CHESS, BREAD},  # PostgreSQL's tsquery operators, as words
    LONG: {CHESS},
}


def memories(e: Engram) -> tuple[UUID, dict[str, str]]:
    """The being and its node ids by action, embedded (hashing) and projected."""
    being_id = UUID(e.beings.register("Aria").being_id)
    being = e.store.get(Being, being_id)
    root = e.store.get(Cluster, next(iter(being.root_ids.values())))
    nodes = [
        MemoryNode.create(
            uuid4(),
            SceneInput.model_validate(
                {"scene": {"action": action, "actors": actors, "when": ["2026-05-02"]}}
            ),
            root,
            0,
            e.clock.now(),
        )
        for action, actors in SCENES.items()
    ]
    for node, embedding in zip(nodes, e.embedder.embed([n.scene["action"] for n in nodes]), strict=True):
        node.embed(embedding, e.clock.now())
    e.store.save(*nodes)
    e.views.ensure()
    return being_id, {n.scene["action"]: str(n.id) for n in nodes}


@pytest.mark.parametrize("text", list(LEXICAL), ids=lambda t: t[:24])
def test_query_text_is_only_its_words(engram: Engram, text: str) -> None:
    being_id, ids = memories(engram)
    want = {ids[a] for a in LEXICAL[text]}
    search = engram.views.search
    assert {i for i, _ in search.lexical(being_id, text, 100)} == want
    names = search.actor_terms(being_id, text)
    assert {i for i, _ in search.lexical(being_id, text, 100, actors=names)} == want
    # The lexical profile ranks the full-text hits alone: exactly those; the default one runs too.
    lexical = engram.reading.query("Aria", text, 100, profile_name="lexical", reactivate=False)
    assert {n.id for n in lexical.nodes} == want
    assert engram.reading.query("Aria", text, 10, reactivate=False).nodes is not None


def test_a_name_in_hostile_text_is_still_a_name(engram: Engram) -> None:
    being_id, ids = memories(engram)
    search = engram.views.search
    for text, want in (
        ('"Mina"', {CHESS}),  # what Mina did, not the greeting
        ("actors:Mina", {CHESS, ACTORS}),
        ("Mina*", {CHESS}),
        ("(Mina OR Lena)", {CHESS, BREAD}),
    ):
        names = search.actor_terms(being_id, text)
        assert "mina" in names, text
        assert {i for i, _ in search.lexical(being_id, text, 100, actors=names)} == {ids[a] for a in want}, (
            text
        )


def _search(engram: Engram, *terms: str, mode: str = "or") -> set[str]:
    return {n.action for n in engram.reading.search_memory("Aria", list(terms), mode=mode).nodes}


def test_search_memory_terms_are_characters_to_find(engram: Engram) -> None:
    memories(engram)
    for term in ("%", "_", "*", "?", "[sure]", "a_b", "c*d", "\\", '"100%', "it's", "SURE]"):
        assert _search(engram, term) == {ODD}, term
    # Each would match more as a LIKE or GLOB pattern ("about", "a_b", "c*d", any "a" or "b").
    for term in ("a%b", "c?d", "[ab]", "%%", "a\\_b", "*sure*"):
        assert _search(engram, term) == set(), term
    assert _search(engram, "%", "chess", mode="and") == set()
    assert _search(engram, "%", "chess") == {ODD, CHESS}
    with pytest.raises(InvalidInput, match="NUL"):
        engram.reading.search_memory("Aria", ["ch\x00ess"])
    with pytest.raises(InvalidInput, match="NUL"):
        engram.reading.query("Aria", "ch\x00ess")


def test_nul_and_control_characters_in_lexical_text_are_separators(engram: Engram) -> None:
    being_id, ids = memories(engram)
    search = engram.views.search
    assert {i for i, _ in search.lexical(being_id, "chess\x00bread\x01river", 100)} == {
        ids[CHESS],
        ids[BREAD],
    }
    assert search.actor_terms(being_id, "mina\x00lena") == {"mina", "lena"}
