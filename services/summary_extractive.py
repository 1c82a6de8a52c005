"""Summaries without an LLM: sentences of the messages themselves (ADR 0053).

Deterministic and offline, so that a deployment without an LLM still has rolling summaries, session
summaries and a spine (each marked `method: extractive`), and a rebuild never needs anything but the
events. The method, in short:

- **What mattered** (and the rolling summary): the messages' sentences scored Luhn-style, by how often
  their content words occur in the session (stop words and one-word pleasantries aside), divided by
  the square root of their length so that long sentences do not win by length alone.
- **Open loops**: questions the user asked and sentences that say something is still to do ("need
  to", "I should", "have to", "I must", "remind me to"); greetings ("how are you?") are not loops.
- **Commitments**: "I will / I'll / let me / I promise / I'm going to / we will".
- **People**: capitalised words that are not at a sentence's start, never written in lower case in
  the session, and not a day, month or pronoun.
- **Tone**: a small word list (positive, negative, urgent).
- **Spine**: the previous version's items with the new ones merged in, duplicates dropped, the newest
  kept when a section is over its bound.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engram.domain.conversation import (
    MAX_ONE_LINER_CHARS,
    MAX_ROLLING_CHARS,
    MAX_SPINE_ITEM_CHARS,
    MAX_SPINE_ITEMS,
    MAX_SUMMARY_ITEM_CHARS,
    MAX_SUMMARY_ITEMS,
    MAX_TONE_CHARS,
    SPINE_SECTIONS,
)

WHAT_MATTERED = 5  # sentences kept as what mattered in a session summary
OPEN_LOOPS = 4
COMMITMENTS = 4
PEOPLE = 8
KEYWORDS_IN_ONE_LINER = 4
ROLLING_LINE_CHARS = 180  # one line of the rolling summary: a sentence, cut
MIN_SENTENCE_WORDS = 4  # shorter sentences ("Hey Mel!", "Thanks!") say nothing to keep
MIN_CONTENT_WORDS = 2  # "Wow, love that painting!" repeats a topic but adds nothing to it

_SENTENCE = re.compile(r"(?<=[.!?…])\s+|\n+")
_WORD = re.compile(r"[^\W\d_][\w'’-]*|\d+")  # words of any script
_CAPITALISED = re.compile(r"\b[A-Z][a-z]{2,}\b")


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


STOP_WORDS = _word_set(
    """a about above after again against all also am an and any are aren't as at be because been before
    being below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't
    down during each few for from further get got had hadn't has hasn't have haven't having he he'd he'll
    he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into is isn't it
    it's its itself just let's like me more most mustn't my myself no nor not now of off on once only or
    other ought our ours ourselves out over own really same shan't she she'd she'll she's should shouldn't
    so some such than that that's the their theirs them themselves then there there's these they they'd
    they'll they're they've this those through to too under until up very was wasn't we we'd we'll we're
    we've were weren't what what's when when's where where's which while who who's whom why why's will
    with won't would wouldn't you you'd you'll you're you've your yours yourself yourselves yeah yes ok
    okay oh hey hi hello thanks thank bye wow lol haha sure well much many one two lot lots thing things
    something anything everything going gonna want know think feel see make made way time good great
    nice cool awesome amazing totally definitely pretty kind sounds sound glad happy love"""
)

NOT_PEOPLE = _word_set(
    """I Im Ive Ill Id The This That These Those There Then They Thanks Thank Hey Hello Yes Yeah Wow Sure
    What When Where Which Who Why How Its It And But Also Just Maybe Well Oh Okay Great Good Nice Love
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June July
    August September October November December Christmas Easter God Mom Dad Mum English Internet
    Congrats Congratulations Sorry Happy Hope Let You Your Our We My Me"""
)

_GREETING = re.compile(
    r"\b(?:how\s+(?:are|have)\s+you|how'?s\s+it\s+going|what'?s\s+up|how\s+are\s+things|you\s+ok(?:ay)?|"
    r"how(?:'s|\s+is|\s+was|\s+has)\s+(?:your|the)\s+(?:week|day|weekend|morning|evening|night))\b",
    re.IGNORECASE,
)
# "should" and "must" as advice to the other ("you should rest") are not loops; said of oneself they are.
_STILL_TO_DO = re.compile(
    r"\b(?:need(?:s)?\s+to|(?:I|we)\s+should|should\s+(?:I|we)|have\s+to|has\s+to|(?:I|we)\s+must|"
    r"got\s+to|gotta|remind\s+me\s+to|don'?t\s+forget|still\s+(?:have|need)|to-?do)\b",
    re.IGNORECASE,
)
_COMMITMENT = re.compile(
    r"\b(?:I\s+will|I'll|I’ll|let\s+me|I\s+promise|I'?m\s+going\s+to|I\s+am\s+going\s+to|we\s+will|"
    r"we'll|we’ll|I\s+plan\s+to|I'?m\s+planning\s+to)\b",
    re.IGNORECASE,
)
_SELF = re.compile(
    r"^(?:I'?m|I\s+am|I\s+work|I\s+live|I\s+grew\s+up|I\s+was\s+born|I\s+studied|I\s+love|I\s+like|"
    r"I\s+hate|I\s+prefer|my\s+\w+\s+(?:is|are))\b",
    re.IGNORECASE,
)
_PROJECT = re.compile(
    r"\b(?:working\s+on|project|building|planning|started|starting|learning|writing|preparing|"
    r"training\s+for|applying|organi[sz]ing)\b",
    re.IGNORECASE,
)
POSITIVE = _word_set(
    "great love loved happy glad excited awesome amazing wonderful proud fun thanks thank enjoy enjoyed "
    "fantastic beautiful grateful congrats congratulations cool nice"
)
NEGATIVE = _word_set(
    "sad sorry angry upset worried worry stressed stress tired hard difficult frustrated annoyed bad "
    "awful terrible afraid scared lonely hurt sick problem problems struggling"
)
URGENT = _word_set("urgent asap immediately deadline emergency hurry")


@dataclass(frozen=True)
class Sentence:
    """One sentence of a message, with who said it and where (message number, sentence index)."""

    speaker: str
    role: str
    text: str
    order: tuple[int, int]

    @property
    def words(self) -> list[str]:
        return [w.lower().replace("’", "'") for w in _WORD.findall(self.text)]

    def line(self, limit: int) -> str:
        return _cut(f"{self.speaker}: {self.text}", limit)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + "…"


def speaker(row: Mapping[str, Any], being: str = "assistant") -> str:
    """Who said a message: the user's name, or the being for an assistant message."""
    return str(row["user_id"]) if row["role"] == "user" else being


def sentences(messages: Iterable[Mapping[str, Any]], being: str = "assistant") -> list[Sentence]:
    """The sentences of the messages' cleaned text (the text journals use), in order."""
    out: list[Sentence] = []
    for m in messages:
        text = m.get("clean") or " ".join(str(m["text"]).split())
        for i, part in enumerate(p.strip() for p in _SENTENCE.split(text)):
            if part:
                out.append(Sentence(speaker(m, being), str(m["role"]), part, (int(m["number"]), i)))
    return out


def content_words(words: Iterable[str]) -> list[str]:
    return [w for w in words if w not in STOP_WORDS and len(w) > 2 and not w.isdigit()]


def frequencies(found: Sequence[Sentence]) -> Counter[str]:
    """How often each content word occurs; the speakers' own names do not count (a name said in
    every greeting says nothing of what the session was about)."""
    names = {s.speaker.lower() for s in found}
    return Counter(w for s in found for w in content_words(s.words) if w not in names)


def score(s: Sentence, freq: Mapping[str, int]) -> float:
    """Luhn's idea: a sentence matters by how often the session repeats its content words (a word said
    once counts for nothing), divided by the root of its length."""
    words = s.words
    content = set(content_words(words))
    if len(words) < MIN_SENTENCE_WORDS or len(content) < MIN_CONTENT_WORDS:
        return 0.0
    significant = sum(freq[w] - 1 for w in content if freq.get(w, 0) > 1)
    return significant / math.sqrt(len(words))


def top(found: Sequence[Sentence], freq: Mapping[str, int], count: int) -> list[Sentence]:
    """The `count` best-scored sentences (scoring above zero), in the order they were said."""
    scored = [(score(s, freq), s) for s in found]
    best = sorted((x for x in scored if x[0] > 0), key=lambda x: (-x[0], x[1].order))[:count]
    return sorted((s for _, s in best), key=lambda s: s.order)


def _dedupe(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = " ".join(item.casefold().split())
        if key and key not in seen:
            seen.add(key)
            out.append(item)
    return out


def open_loops(found: Sequence[Sentence], freq: Mapping[str, int], count: int = OPEN_LOOPS) -> list[Sentence]:
    """The user's questions (not greetings) and what someone says is still to do; the best-scored."""
    loops = [
        s
        for s in found
        if len(s.words) >= MIN_SENTENCE_WORDS
        and not _GREETING.search(s.text)
        and ((s.role == "user" and s.text.endswith("?")) or _STILL_TO_DO.search(s.text))
    ]
    return _best(loops, freq, count)


def commitments(
    found: Sequence[Sentence], freq: Mapping[str, int], count: int = COMMITMENTS
) -> list[Sentence]:
    said = [s for s in found if _COMMITMENT.search(s.text) and len(s.words) >= MIN_SENTENCE_WORDS]
    return _best(said, freq, count)


def _best(candidates: Sequence[Sentence], freq: Mapping[str, int], count: int) -> list[Sentence]:
    """The `count` best-scored of `candidates` (all of them count, a zero score too), in order."""
    best = sorted(candidates, key=lambda s: (-score(s, freq), s.order))[:count]
    return sorted(best, key=lambda s: s.order)


def people(found: Sequence[Sentence], count: int = PEOPLE) -> list[str]:
    """Names: capitalised words not at a sentence's start, never seen in lower case, the most said
    first; the speakers themselves are who the session is with, not whom it mentions."""
    lower = {w for s in found for w in _WORD.findall(s.text) if w.islower()}
    lower |= {s.speaker.lower() for s in found}
    names: Counter[str] = Counter()
    first: dict[str, tuple[int, int]] = {}
    for s in found:
        for match in _CAPITALISED.finditer(s.text):
            name = match.group()
            if match.start() == 0 or name in NOT_PEOPLE or name.lower() in lower:
                continue
            names[name] += 1
            first.setdefault(name, s.order)
    return sorted(names, key=lambda n: (-names[n], first[n]))[:count]


def tone(found: Sequence[Sentence]) -> str:
    words = [w for s in found for w in s.words]
    positive = sum(w in POSITIVE for w in words)
    negative = sum(w in NEGATIVE for w in words)
    urgent = sum(w in URGENT for w in words)
    if positive and negative and min(positive, negative) * 2 >= max(positive, negative):
        mood = "mixed"
    elif positive > negative:
        mood = "positive"
    elif negative > positive:
        mood = "negative"
    else:
        mood = "neutral"
    return _cut(f"{mood}, urgent" if urgent >= 2 else mood, MAX_TONE_CHARS)


def keywords(freq: Mapping[str, int], count: int = KEYWORDS_IN_ONE_LINER) -> list[str]:
    repeated = [w for w, n in freq.items() if n > 1]
    return sorted(repeated, key=lambda w: (-freq[w], w))[:count]


def session_summary(messages: Sequence[Mapping[str, Any]], being: str = "assistant") -> dict[str, Any]:
    """Spec 004's session summary of a closed session's messages, within the domain's bounds."""
    found = sentences(messages, being)
    freq = frequencies(found)
    users = sorted({str(m["user_id"]) for m in messages}) or ["nobody"]
    named = people(found)
    topics = keywords(Counter({w: n for w, n in freq.items() if w.capitalize() not in named}))
    about = f" about {', '.join(topics)}" if topics else ""
    one_liner = _cut(f"{len(messages)} messages with {', '.join(users)}{about}", MAX_ONE_LINER_CHARS)
    item = min(MAX_SUMMARY_ITEM_CHARS, 240)
    mattered = top(found, freq, WHAT_MATTERED) or found[:1]
    return {
        "one_liner": one_liner,
        "what_mattered": _dedupe(s.line(item) for s in mattered)[:MAX_SUMMARY_ITEMS],
        "open_loops": _dedupe(s.line(item) for s in open_loops(found, freq))[:MAX_SUMMARY_ITEMS],
        "commitments": _dedupe(s.line(item) for s in commitments(found, freq))[:MAX_SUMMARY_ITEMS],
        "people": named[:MAX_SUMMARY_ITEMS],
        "tone": tone(found),
    }


def rolling_summary(
    previous: str | None,
    session_messages: Sequence[Mapping[str, Any]],
    new_messages: Sequence[Mapping[str, Any]],
    being: str = "assistant",
) -> str:
    """The open session's rolling summary, built on the previous one: its lines stay, the best
    sentences of the new messages join them, and while the text is over 600 characters the line that
    scores lowest against the whole session so far goes (the newest wins a tie). One line a sentence."""
    everything = sentences(session_messages, being)
    freq = frequencies(everything)
    new = sentences(new_messages, being)
    kept_before = [ln for ln in (previous or "").split("\n") if ln.strip()]
    candidates: list[tuple[float, int, str]] = []
    for i, ln in enumerate(kept_before):
        text = ln.split(": ", 1)[-1]
        candidates.append((score(Sentence("", "", text, (0, 0)), freq), i, ln))
    chosen = top(new, freq, 3) or [s for s in new if len(s.words) >= MIN_SENTENCE_WORDS][-1:] or new[-1:]
    for j, s in enumerate(chosen):
        candidates.append((score(s, freq), len(kept_before) + j, s.line(ROLLING_LINE_CHARS)))
    lines = _dedupe(c[2] for c in candidates)
    by_line = {c[2]: c for c in candidates}
    while len("\n".join(lines)) > MAX_ROLLING_CHARS and len(lines) > 1:
        drop = min(lines, key=lambda ln: (by_line[ln][0], by_line[ln][1]))
        lines.remove(drop)
    return _cut("\n".join(lines), MAX_ROLLING_CHARS)


def _merged(previous: Sequence[str], new: Sequence[str]) -> list[str]:
    """The previous items and the new ones, duplicates dropped (a repeated item counts as new), the
    newest `MAX_SPINE_ITEMS` kept."""
    new_keys = {" ".join(n.casefold().split()) for n in new}
    kept = [p for p in previous if " ".join(p.casefold().split()) not in new_keys]
    return _dedupe([*kept, *new])[-MAX_SPINE_ITEMS:]


def spine(
    previous: Mapping[str, Sequence[str]] | None,
    messages: Sequence[Mapping[str, Any]],
    being: str = "assistant",
) -> dict[str, list[str]]:
    """A new spine version: the previous sections with what the new messages add. PROFILE: what the
    user says of themself; PROJECTS: what someone is working on or planning; PEOPLE: the names said;
    OPEN_LOOPS: questions and things still to do."""
    found = sentences(messages, being)
    freq = frequencies(found)
    item = MAX_SPINE_ITEM_CHARS
    user_sentences = [s for s in found if s.role == "user" and len(s.words) >= MIN_SENTENCE_WORDS]
    new = {
        "PROFILE": [
            s.line(item) for s in _best([s for s in user_sentences if _SELF.search(s.text)], freq, 4)
        ],
        "PROJECTS": [
            s.line(item)
            for s in _best(
                [s for s in found if _PROJECT.search(s.text) and len(s.words) >= MIN_SENTENCE_WORDS], freq, 4
            )
        ],
        "PEOPLE": people(found, 6),
        "OPEN_LOOPS": [s.line(item) for s in open_loops(found, freq)],
    }
    before = previous or {}
    return {name: _merged(list(before.get(name, [])), new[name]) for name in SPINE_SECTIONS}
