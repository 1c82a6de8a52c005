"""The extraction answer's schema as providers see it, and a strict provider's answer (every optional
field null) taken with the defaults (ADR 0058)."""

from __future__ import annotations

import json

from engram.adapters.llm.strict_schema import to_strict_json_schema
from engram.services.extraction_prompts import FactsAnswer
from engram.services.fact_extraction import EXTRACTED_CONFIDENCE, sort_candidates

ROW = {"text": "I work as a nurse in Lyon.", "user_id": "lena", "message_key": "m-1", "channel": None}


def test_the_items_are_typed_for_strict_structured_outputs() -> None:
    schema = to_strict_json_schema(FactsAnswer.model_json_schema())
    items = schema["properties"]["facts"]["items"]
    assert items["type"] == "object" and items["additionalProperties"] is False
    assert set(items["required"]) == set(items["properties"]) >= {"fact", "type", "entity_refs"}


def test_a_strict_answer_with_nulls_takes_the_defaults() -> None:
    nulls = dict.fromkeys(
        ("type", "subject", "evidence", "confidence", "importance", "entity_refs", "entity_label")
    )
    answer = FactsAnswer.model_validate_json(
        json.dumps({"facts": [{"fact": "Lena works as a nurse", **nulls}]})
    )
    out = sort_candidates(list(answer.facts), ROW, "Aria")
    assert out.rejected == []
    [c] = out.contents
    assert (c.subject, c.fact_type, c.importance, c.confidence) == ("lena", "other", 1, EXTRACTED_CONFIDENCE)
    assert (c.source, c.source_message_id, c.entity_refs) == ("extraction", "m-1", [])


def test_a_badly_shaped_item_is_refused_alone() -> None:
    answer = FactsAnswer.model_validate_json(
        json.dumps({"facts": ["just text", {"fact": "Lena works as a nurse"}]})
    )
    out = sort_candidates(list(answer.facts), ROW, "Aria")
    assert [r["code"] for r in out.rejected] == ["wrong_shape"] and len(out.contents) == 1
