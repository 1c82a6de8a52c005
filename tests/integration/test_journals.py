"""Daily journals and MEMORY.md (spec 001, ADR 0054) on both backends: the files a refresh writes,
incremental refreshes, byte-identical files after a rebuild, atomic writes, the worker's task."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engram.adapters.journal_files import JournalFolder
from engram.domain.message import Role
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import MessageInput
from engram.services.config import Settings
from engram.services.errors import Conflict
from engram.services.journals import STATE_FILE, Journals
from engram.services.worker import Worker
from tests.integration.http_support import wait_until
from tests.support import SeededIds, SteppingClock

DAY1 = datetime(2026, 10, 29, 9, 0, tzinfo=UTC)
DAY2 = datetime(2026, 10, 30, 9, 0, tzinfo=UTC)


def msg(
    key: str, at: datetime, text: str, *, user: str = "Mina", role: Role = Role.USER, **kw: object
) -> MessageInput:
    return MessageInput(id=key, user=user, text=text, role=role, at=at, **kw)  # type: ignore[arg-type]


class CountingFiles:
    """The real folder, counting the writes per file name."""

    def __init__(self, inner: JournalFolder) -> None:
        self.inner = inner
        self.writes: list[str] = []

    def location(self, folder: str) -> str:
        return self.inner.location(folder)

    def read(self, folder: str, name: str) -> str | None:
        return self.inner.read(folder, name)

    def write(self, folder: str, name: str, text: str) -> None:
        self.writes.append(name)
        self.inner.write(folder, name, text)


@pytest.fixture
def aria(engram: Engram) -> Engram:
    engram.beings.register("Aria")
    return engram


def folder(e: Engram) -> Path:
    return e.settings.data_dir / "journals" / "Aria"


def counting(e: Engram) -> CountingFiles:
    files = CountingFiles(JournalFolder(e.settings.data_dir / "journals"))
    e.__dict__["journals"] = Journals(e.store, lambda: e.views, files, e.views.named_lock)
    return files


def test_a_refresh_writes_the_days_and_memory(aria: Engram) -> None:
    aria.messages.take_many(
        "Aria",
        [
            msg("m2", DAY1 + timedelta(minutes=5), "  Planted   the tomatoes\ttoday  "),
            msg("m1", DAY1, "Good morning, Aria"),
            msg("m3", DAY1 + timedelta(minutes=6), "Lovely!", role=Role.ASSISTANT),
            msg("m4", DAY1 + timedelta(minutes=7), "ok"),  # under 4 characters: not journalled
            msg("m5", DAY2, "x" * 400, channel="garden"),
        ],
    )
    done = aria.journals.refresh("Aria")
    assert done.full and done.days == ["2026-10-29", "2026-10-30"] and done.memory
    day1 = (folder(aria) / "2026-10-29.md").read_text(encoding="utf-8")
    assert day1 == (
        "# Aria — journal of 2026-10-29 (UTC)\n\n"
        "- 09:00:00 Mina: Good morning, Aria\n"
        "- 09:05:00 Mina: Planted the tomatoes today\n"
        "- 09:06:00 Aria: Lovely!\n"
    )
    day2 = (folder(aria) / "2026-10-30.md").read_text(encoding="utf-8")
    assert day2 == f"# Aria — journal of 2026-10-30 (UTC)\n\n- 09:00:00 Mina (garden): {'x' * 320}\n"
    memory = (folder(aria) / "MEMORY.md").read_text(encoding="utf-8")
    assert memory == aria.journals.memory_text("Aria")
    assert "- [2026-10-30](2026-10-30.md) — 1 message\n- [2026-10-29](2026-10-29.md) — 3 messages\n" in memory
    assert "- 2026-10-29 09:06:00 Aria: Lovely!\n- 2026-10-30 09:00:00 Mina (garden): xxx" in memory
    assert aria.journals.day_text("Aria") == ("2026-10-30", day2)
    assert aria.journals.day_text("Aria", "2026-10-29") == ("2026-10-29", day1)


def test_a_refresh_rewrites_only_the_days_that_got_messages(aria: Engram) -> None:
    files = counting(aria)
    aria.messages.take_many("Aria", [msg("a", DAY1, "day one words"), msg("b", DAY2, "day two words")])
    aria.journals.refresh("Aria")
    assert sorted(files.writes) == sorted(["2026-10-29.md", "2026-10-30.md", "MEMORY.md", STATE_FILE])
    files.writes.clear()
    nothing = aria.journals.refresh("Aria")
    assert files.writes == [] and not nothing.days and not nothing.memory
    aria.messages.take("Aria", msg("c", DAY2 + timedelta(hours=1), "more of day two"))
    again = aria.journals.refresh("Aria")
    assert files.writes == ["2026-10-30.md", "MEMORY.md", STATE_FILE] and again.days == ["2026-10-30"]
    assert "more of day two" in (folder(aria) / "2026-10-30.md").read_text(encoding="utf-8")
    files.writes.clear()
    aria.messages.take("Aria", msg("d", DAY1 + timedelta(hours=2), "hey"))  # not journalled
    assert aria.journals.refresh("Aria").days == [] and files.writes == [STATE_FILE]
    files.writes.clear()
    assert aria.journals.refresh("Aria", full=True).full
    assert sorted(files.writes) == sorted(["2026-10-29.md", "2026-10-30.md", "MEMORY.md", STATE_FILE])
    (folder(aria) / STATE_FILE).write_text("{not json", encoding="utf-8")  # damaged: every file again
    aria.messages.take("Aria", msg("e", DAY1 + timedelta(hours=3), "late on day one"))
    assert aria.journals.refresh("Aria").days == ["2026-10-29", "2026-10-30"]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.name != STATE_FILE}


def test_journals_rebuilt_from_the_log_are_byte_identical(aria: Engram) -> None:
    users = ["Mina", "Bo", "Ça va ?"]
    for batch in range(5):  # messages keep coming between refreshes, some late, over three days
        start = DAY1 + timedelta(hours=10 * batch)
        aria.messages.take_many(
            "Aria",
            [
                msg(
                    f"b{batch}-{i}",
                    start + timedelta(minutes=7 * i) - (timedelta(days=1) if i == 3 else timedelta()),
                    f"batch {batch} message {i} *with* # marks" if i % 4 else "hi",
                    user=users[i % 3],
                    role=Role.ASSISTANT if i % 5 == 4 else Role.USER,
                    channel="garden" if i % 2 else None,
                )
                for i in range(9)
            ],
        )
        aria.journals.refresh("Aria")
    live = _snapshot(folder(aria))
    assert len(live) >= 4  # MEMORY.md and at least three days
    shutil.rmtree(folder(aria))
    aria.views.rebuild("conversations")
    aria.journals.refresh("Aria")
    assert _snapshot(folder(aria)) == live


def test_an_unknown_being_and_a_bad_date(aria: Engram) -> None:
    from engram.domain.errors import InvalidInput
    from engram.services.errors import NotFound

    with pytest.raises(NotFound):
        aria.journals.refresh("Nobody")
    with pytest.raises(NotFound, match="no journal yet"):
        aria.journals.day_text("Aria")
    with pytest.raises(InvalidInput) as bad:
        aria.journals.day_text("Aria", "2026-02-30")
    assert bad.value.details["field"] == "date"
    aria.messages.take("Aria", msg("a", DAY1, "hello Aria"))
    with pytest.raises(NotFound, match="2026-10-30"):
        aria.journals.day_text("Aria", "2026-10-30")


def test_a_strange_name_gets_a_safe_folder(engram: Engram) -> None:
    created = engram.beings.register("../Ünder/..")
    engram.messages.take("../Ünder/..", msg("a", DAY1, "hello there"))
    done = engram.journals.refresh(created.being_id)
    root = engram.settings.data_dir / "journals"
    [made] = list(root.iterdir())
    assert made.name == f"Under-{created.being_id.replace('-', '')[:12]}"
    assert done.folder == made.name and (made / "2026-10-29.md").is_file()
    assert (made / "2026-10-29.md").read_text(encoding="utf-8").startswith("# ../Ünder/.. — journal")


def test_a_reader_never_sees_a_partial_file(tmp_path: Path) -> None:
    files = JournalFolder(tmp_path)
    versions = [f"version {i}\n" + "line of the journal\n" * (1 + (i * 7919) % 3000) for i in range(60)]
    files.write("Aria", "MEMORY.md", versions[0])
    seen: set[str] = set()
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            text = files.read("Aria", "MEMORY.md")
            assert text is not None
            seen.add(text)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for text in versions[1:]:
            files.write("Aria", "MEMORY.md", text)
    finally:
        stop.set()
        reader.join()
    assert seen and seen <= set(versions)
    assert [p.name for p in (tmp_path / "Aria").iterdir()] == ["MEMORY.md"]  # no temporary file left
    assert (tmp_path / "Aria" / "MEMORY.md").stat().st_mode & 0o777 == 0o644  # not mkstemp's 0600


@pytest.mark.parametrize("bad", ["..", ".", "a/b", ""])
def test_the_folder_refuses_a_path_that_is_not_one_component(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError):
        JournalFolder(tmp_path).write(bad, "MEMORY.md", "x")
    with pytest.raises(ValueError):
        JournalFolder(tmp_path).write("Aria", bad, "x")


def test_the_worker_round_refreshes_only_beings_with_new_messages(aria: Engram) -> None:
    aria.beings.register("Bo")
    aria.messages.take("Aria", msg("a", DAY1, "hello Aria"))
    aria.messages.take("Bo", msg("a", DAY1, "hello Bo"))
    assert sorted(r.being for r in aria.journals.refresh_due() if r.days) == ["Aria", "Bo"]
    assert aria.journals.refresh_due() == []
    aria.messages.take("Bo", msg("b", DAY2, "again, Bo"))
    [again] = aria.journals.refresh_due()
    assert again.being == "Bo" and again.days == ["2026-10-30"]


def _worker(
    make_settings: Callable[..., Settings], clock: SteppingClock, interval: float
) -> tuple[Engram, Worker]:
    e = bootstrap(make_settings(journal_interval_s=interval), clock=clock, ids=SeededIds())
    e.beings.register("Aria")
    e.messages.take("Aria", msg("a", DAY1, "hello from the worker test"))
    worker = Worker(
        e.views, names=["conversations"], poll_interval=0.05, journal_refresh=e.journals.refresh_due
    )
    return e, worker


def test_the_worker_writes_the_journals_by_itself(
    make_settings: Callable[..., Settings], clock: SteppingClock
) -> None:
    e, worker = _worker(make_settings, clock, 0.05)
    try:
        worker.start()
        assert "journal-refresh" in [t.name for t in worker._maintainers]
        assert wait_until(lambda: (folder(e) / "MEMORY.md").is_file(), timeout=30)
        e.messages.take("Aria", msg("b", DAY2, "a second day of it"))
        assert wait_until(lambda: (folder(e) / "2026-10-30.md").is_file(), timeout=30)
    finally:
        worker.stop()
        e.close()


def test_an_interval_of_zero_means_never(
    make_settings: Callable[..., Settings], clock: SteppingClock
) -> None:
    e, worker = _worker(make_settings, clock, 0)
    try:
        worker.start()
        assert "journal-refresh" not in [t.name for t in worker._maintainers]
    finally:
        worker.stop()
        e.close()


class FailingFiles(CountingFiles):
    """Refuses to write one folder, as a being held back in the view would be refused."""

    def write(self, folder: str, name: str, text: str) -> None:
        if folder == "Aria":
            raise Conflict("this folder is refused for the test")
        super().write(folder, name, text)


def test_a_being_that_fails_does_not_stop_the_round(aria: Engram) -> None:
    aria.beings.register("Bo")
    files = FailingFiles(JournalFolder(aria.settings.data_dir / "journals"))
    aria.__dict__["journals"] = Journals(aria.store, lambda: aria.views, files, aria.views.named_lock)
    aria.messages.take("Aria", msg("a", DAY1, "hello Aria"))
    aria.messages.take("Bo", msg("a", DAY1, "hello Bo"))
    assert [r.being for r in aria.journals.refresh_due()] == ["Bo"]
    assert "2026-10-29.md" in files.writes


def test_memory_written_incrementally_lists_the_latest_days_as_the_view_does(aria: Engram) -> None:
    """MEMORY.md's list of daily logs comes from the counts kept in the folder's state on increments,
    and from the view on a read: they agree, bounds and "and N more" included."""
    for start in (0, 9):  # 18 days in two halves, a refresh after each; a late message in between
        aria.messages.take_many(
            "Aria",
            [
                msg(f"d{d}-{i}", DAY1 - timedelta(days=20 - d, hours=i), "a day's words")
                for d in range(start, start + 9)
                for i in range(1 + d % 3)
            ],
        )
        aria.journals.refresh("Aria")
    late_day = (DAY1 - timedelta(days=15)).date().isoformat()  # one of the first half, still listed
    aria.messages.take("Aria", msg("late", DAY1 - timedelta(days=15, minutes=30), "late words for that day"))
    assert aria.journals.refresh("Aria").days == [late_day]
    memory = (folder(aria) / "MEMORY.md").read_text(encoding="utf-8")
    assert memory == aria.journals.memory_text("Aria")
    assert memory.count("](20") == 14 and "- and 4 more\n" in memory
    assert f"- [{late_day}]({late_day}.md) — 4 messages\n" in memory
