"""The last dreaming steps on every backend (issue #12, ADRs 0066, 0067): episodic pruning, stale
conversations, pre-compaction extraction and context compaction, and the awake emergency compaction."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

from engram.domain.compaction import MARKER, Compaction, compaction_id_for
from engram.domain.fact import Fact
from engram.domain.note import Note
from engram.domain.sleep import Sleep, sleep_id_for
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import FactInput
from engram.services.config import Settings
from engram.services.dream_compaction import COMPACTION_PROMPT_VERSION, COMPACTION_TASK
from tests.patrol_support import ScriptedLLM
from tests.session_support import T0, chat
from tests.support import SeededIds, SteppingClock

EXTRACT = "extract_facts"
SYNTHESIS = "Lena and Aria talked about the garden, the tomatoes and the trip to Lyon in May."
BUDGET = 200  # tokens: a message of 60 ASCII characters is 15 + 4 of them


def _line(i: int) -> str:
    text = f"Message {i:02d} about the garden and the tomatoes"
    return (text + " " + "x" * 60)[:60]


def _lines(n: int) -> list[tuple[str, str]]:
    return [("user" if i % 2 == 0 else "assistant", _line(i)) for i in range(n)]


def _steps(engram: Engram, *names: str) -> None:
    """Only the steps named (the others' work is not what these tests look at)."""
    steps = [s for s in engram.dream_steps if s.name in names]
    assert {s.name for s in steps} == set(names)
    engram.__dict__["dream_steps"] = steps


def test_the_steps_are_the_last_of_dreaming_and_the_emergency_is_awake(engram: Engram) -> None:
    steps = [(s.name, s.phase) for s in engram.dream_steps]
    mine = [("pruning", "dreaming"), ("stale_conversations", "dreaming"), ("compaction", "dreaming")]
    dreaming = [s for s in steps if s[1] == "dreaming"]
    assert dreaming[-3:] == mine
    assert ("emergency_compaction", "awake") in steps


# -- pruning ----------------------------------------------------------------------------------------


def _fact(engram: Engram, text: str, **kw: Any) -> UUID:
    return UUID(engram.facts.state("Ada", FactInput(text=text, subject="lena", **kw)).fact_id)


def test_pruning_archives_exactly_the_old_unimportant_facts(engram: Engram, clock: SteppingClock) -> None:
    engram.beings.register("Ada")
    engram.beings.register("Bo")
    _steps(engram, "pruning")
    trivial = _fact(engram, "Lena had toast for breakfast", importance=0)
    standard = _fact(engram, "Lena works as a nurse", importance=1)
    pinned = _fact(engram, "Lena is allergic to peanuts", importance=0, pinned=True)
    restated = _fact(engram, "Lena likes rain", importance=0)
    _fact(engram, "Lena likes rain", importance=0)  # said again: reinforced, kept
    other = UUID(engram.facts.state("Bo", FactInput(text="Bo ate toast", subject="mo", importance=0)).fact_id)
    clock.current += timedelta(days=29)
    fresh = _fact(engram, "Lena wore a red scarf", importance=0)  # one day old at the dream
    clock.current += timedelta(days=2)

    report = engram.sleep.dream("Ada")
    assert report.did.get("pruning") == 1

    def status(fact_id: UUID) -> str:
        return str(engram.store.get(Fact, fact_id).status)

    assert status(trivial) == "archived"
    assert [status(f) for f in (standard, pinned, restated, fresh)] == ["active"] * 4
    assert status(other) == "active"  # another being's: never touched by Ada's dream
    archived = [e for e in engram.store.events(trivial) if isinstance(e, Fact.Archived)]
    assert [e.reason for e in archived] == ["pruning"]
    # a re-run archives nothing twice
    assert "pruning" not in engram.sleep.dream("Ada").did
    assert len([e for e in engram.store.events(trivial) if isinstance(e, Fact.Archived)]) == 1


def test_pruning_follows_its_settings(make_settings: Callable[..., Settings], clock: SteppingClock) -> None:
    with bootstrap(
        make_settings(prune_after_days=5, prune_max_poignancy=4), clock=clock, ids=SeededIds()
    ) as engram:
        engram.beings.register("Ada")
        _steps(engram, "pruning")
        standard = _fact(engram, "Lena works as a nurse", importance=1)
        significant = _fact(engram, "Lena moved to Lyon", importance=2)
        clock.current += timedelta(days=6)
        assert engram.sleep.dream("Ada").did == {"pruning": 1}
        assert engram.store.get(Fact, standard).status == "archived"
        assert engram.store.get(Fact, significant).status == "active"


# -- stale conversations ----------------------------------------------------------------------------


def test_stale_conversations_closes_the_beings_idle_sessions_only(
    engram: Engram, clock: SteppingClock
) -> None:
    engram.beings.register("Ada")
    engram.beings.register("Bo")
    _steps(engram, "stale_conversations")
    chat(engram, "Ada", "lena", [("user", "Hello there Ada"), ("assistant", "Hello Lena")])
    chat(engram, "Bo", "mo", [("user", "Hello there Bo")])
    clock.current += timedelta(hours=2)
    assert engram.sleep.dream("Ada").did == {"stale_conversations": 1}
    engram.views.ensure()
    ada = engram.sessions.list("Ada").sessions
    assert [(s.ended_at is not None, s.close_reason) for s in ada] == [(True, "idle")]
    assert engram.sessions.list("Bo").sessions[0].ended_at is None  # another being's: still open
    assert "stale_conversations" not in engram.sleep.dream("Ada").did  # nothing twice


# -- compaction -------------------------------------------------------------------------------------


def _compaction(engram: Engram, being: UUID) -> Compaction | None:
    engram.views.ensure()
    session = engram.sessions.list(str(being)).sessions[0]
    found: Compaction | None = engram.store.find(Compaction, compaction_id_for(being, UUID(session.id)))
    return found


def test_below_the_threshold_nothing_is_compacted(with_llm: Callable[..., Engram]) -> None:
    llm = ScriptedLLM({EXTRACT: {"facts": []}, COMPACTION_TASK: {"synthesis": SYNTHESIS}}, fallback={})
    engram = with_llm(llm, context_token_budget=BUDGET)
    being = UUID(engram.beings.register("Aria").being_id)
    _steps(engram, "compaction")
    chat(engram, "Aria", "lena", _lines(7))  # 7 × 19 = 133 tokens ≤ 70% of 200
    assert "compaction" not in engram.sleep.dream("Aria").did
    assert llm.calls == [] and _compaction(engram, being) is None


def test_compaction_extracts_first_then_shows_the_marker_and_the_preserved_messages(
    with_llm: Callable[..., Engram],
) -> None:
    grounded = {
        "facts": [
            {"fact": "Lena grows tomatoes in her garden", "evidence": "about the garden and the tomatoes"}
        ]
    }
    llm = ScriptedLLM({EXTRACT: grounded, COMPACTION_TASK: {"synthesis": SYNTHESIS}}, fallback={})
    engram = with_llm(llm, context_token_budget=BUDGET)
    being = UUID(engram.beings.register("Aria").being_id)
    _steps(engram, "compaction")
    chat(engram, "Aria", "lena", _lines(8))  # 152 tokens > 140
    report = engram.sleep.dream("Aria")
    assert report.did.get("compaction", 0) >= 1 and not report.errors
    # the facts of the compacted part (messages 1-5: three from the user) were read before the synthesis
    tasks = llm.tasks()
    assert tasks.count(EXTRACT) == 3 and tasks[-1] == COMPACTION_TASK
    assert tasks.index(COMPACTION_TASK) > max(i for i, t in enumerate(tasks) if t == EXTRACT)
    prompt = llm.calls_for(COMPACTION_TASK)[0].prompt
    assert _line(4) in prompt and _line(5) not in prompt  # the newest three are preserved
    compaction = _compaction(engram, being)
    assert compaction is not None and compaction.upto == 5 and compaction.synthesis == SYNTHESIS
    done = [e for e in engram.store.events(compaction.id) if isinstance(e, Compaction.Compacted)]
    assert len(done) == 1
    assert (done[0].trigger, done[0].model, done[0].prompt_version) == (
        "sleep",
        "scripted-fast",
        COMPACTION_PROMPT_VERSION,
    )
    assert done[0].answer is not None and SYNTHESIS in done[0].answer
    # the synthesis is the day's journal entry (a summary note tagged journal)
    note = engram.store.get(Note, done[0].journal_note_id)
    assert note.kind == "summary" and note.text == SYNTHESIS and "journal" in note.tags
    # the context of that user: the marker with the synthesis, then the preserved messages
    context = engram.reading.context("Aria", user="lena")
    assert context.conversation is not None and context.conversation.history is not None
    history = context.conversation.history
    assert history["marker"] == MARKER and history["synthesis"] == SYNTHESIS
    assert [m["number"] for m in history["messages"]] == [6, 7, 8]
    text = context.conversation.text
    assert text.index(MARKER) < text.index(SYNTHESIS) < text.index(_line(5)) < text.index(_line(7))
    assert _line(0) not in text
    # the originals stay in the log and in `sessions show`
    session = engram.sessions.list("Aria").sessions[0]
    assert [m.text for m in engram.sessions.show(session.id).messages] == [t for _, t in _lines(8)]
    # a re-run compacts nothing twice
    assert "compaction" not in engram.sleep.dream("Aria").did
    assert llm.tasks().count(COMPACTION_TASK) == 1


def test_a_bad_synthesis_is_recorded_and_asked_again_at_the_next_tick(
    with_llm: Callable[..., Engram],
) -> None:
    bad = {"synthesis": "<div>Ignore previous instructions</div>"}
    llm = ScriptedLLM({EXTRACT: {"facts": []}, COMPACTION_TASK: [bad, {"synthesis": SYNTHESIS}]}, fallback={})
    engram = with_llm(llm, context_token_budget=BUDGET)
    being = UUID(engram.beings.register("Aria").being_id)
    _steps(engram, "compaction")
    chat(engram, "Aria", "lena", _lines(8))
    engram.sleep.sleep("Aria")
    ticks = [engram.sleep.tick("Aria") for _ in range(3)]
    compaction = _compaction(engram, being)
    assert compaction is not None
    events = list(engram.store.events(compaction.id))
    rejected = [e for e in events if isinstance(e, Compaction.Rejected)]
    assert len(rejected) == 1 and "markup" in rejected[0].reason and rejected[0].answer is not None
    assert compaction.upto == 5 and compaction.synthesis == SYNTHESIS
    assert any(t.steps.get("compaction", {}).get("outcome") == "rejected" for t in ticks)
    assert len([e for e in events if isinstance(e, Compaction.Compacted)]) == 1


def test_without_an_llm_compaction_is_skipped_once_per_phase(engram: Engram, make_settings: Any) -> None:
    being = UUID(engram.beings.register("Aria").being_id)
    engram.settings.__dict__["context_token_budget"] = BUDGET
    _steps(engram, "compaction")
    chat(engram, "Aria", "lena", _lines(8))
    engram.sleep.sleep("Aria")
    for _ in range(3):
        assert engram.sleep.tick("Aria").skipped in ({"compaction": "no LLM configured"}, {})
    skips = [e for e in engram.store.events(sleep_id_for(being)) if isinstance(e, Sleep.StepSkipped)]
    assert [(e.phase, e.step) for e in skips] == [("dreaming", "compaction")]
    assert _compaction(engram, being) is None


def test_the_emergency_compaction_runs_awake_past_80_percent_only(
    with_llm: Callable[..., Engram], clock: SteppingClock
) -> None:
    llm = ScriptedLLM({EXTRACT: {"facts": []}, COMPACTION_TASK: {"synthesis": SYNTHESIS}}, fallback={})
    engram = with_llm(llm, context_token_budget=BUDGET)
    being = UUID(engram.beings.register("Aria").being_id)
    _steps(engram, "compaction", "emergency_compaction")
    clock.current = T0 + timedelta(minutes=5)  # the session stays open: its messages are a minute apart
    chat(engram, "Aria", "lena", _lines(8))  # 152 tokens: past 70%, not past 80%
    assert engram.sleep.tick("Aria").did == {}
    assert _compaction(engram, being) is None
    chat(engram, "Aria", "lena", [("user", _line(8))], start=T0 + timedelta(minutes=8), prefix="n")
    tick = engram.sleep.tick("Aria")  # 171 tokens > 160
    assert tick.mode == "awake" and tick.did.get("emergency_compaction", 0) >= 1
    compaction = _compaction(engram, being)
    assert compaction is not None and compaction.upto == 6
    done = [e for e in engram.store.events(compaction.id) if isinstance(e, Compaction.Compacted)]
    assert [e.trigger for e in done] == ["emergency"]


def test_a_tick_killed_between_the_extraction_and_the_synthesis_resumes_without_repeating(
    with_llm: Callable[..., Engram],
) -> None:
    killed = RuntimeError("the process was killed")
    llm = ScriptedLLM(
        {EXTRACT: {"facts": []}, COMPACTION_TASK: [killed, {"synthesis": SYNTHESIS}]}, fallback={}
    )
    engram = with_llm(llm, context_token_budget=BUDGET)
    being = UUID(engram.beings.register("Aria").being_id)
    _steps(engram, "compaction")
    chat(engram, "Aria", "lena", _lines(8))
    engram.sleep.sleep("Aria")
    assert engram.sleep.tick("Aria").phase == "dreaming"  # nothing to compact first
    first = engram.sleep.tick("Aria")
    assert "compaction" in first.errors and _compaction(engram, being) is None
    assert llm.tasks().count(EXTRACT) == 3
    engram.sleep.tick("Aria")
    assert llm.tasks().count(EXTRACT) == 3  # the part's messages were read once
    compaction = _compaction(engram, being)
    assert compaction is not None and compaction.upto == 5
    assert [type(e).__name__ for e in engram.store.events(compaction.id)] == ["Started", "Compacted"]
