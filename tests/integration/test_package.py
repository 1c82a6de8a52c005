"""The distribution: one import package, `engram`, whose public API is the README's example."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support import ROOT


@pytest.mark.slow
def test_the_wheel_installs_only_the_engram_package(tmp_path: Path) -> None:
    source = tmp_path / "src"  # a copy: building writes build/ and *.egg-info beside the sources
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for part in ("engram", "domain", "services", "projections", "adapters", "bench"):
        shutil.copytree(ROOT / part, source / part, symlinks=True, ignore=ignore)
    for part in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / part, source / part)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            ".",
        ],
        cwd=source,
        check=True,
        capture_output=True,
    )
    [wheel] = tmp_path.glob("engram-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"engram", wheel.name.split("-py3")[0] + ".dist-info"}
    for layer in ("domain", "services", "projections", "adapters"):
        assert f"engram/{layer}/__init__.py" in names
    # What the package reads at run time ships with it; the benchmarks and tests do not.
    assert "engram/adapters/embedders/assets/tokenizer.json" in names
    assert "engram/py.typed" in names
    assert not any(
        name.startswith(("engram/tests/", "engram/bench/", "engram/adapters/bench/")) for name in names
    )
    # The licence the README names, in full, in the wheel's metadata (PEP 639: dist-info/licenses/).
    dist_info = wheel.name.split("-py3")[0] + ".dist-info"
    shipped = zipfile.ZipFile(wheel).read(f"{dist_info}/licenses/LICENSE").decode("utf-8")
    assert shipped == (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License\n                           Version 2.0, January 2004" in shipped
    assert (
        "END OF TERMS AND CONDITIONS" in shipped and "Licence: Apache-2.0" in (ROOT / "README.md").read_text()
    )
    metadata = zipfile.ZipFile(wheel).read(f"{dist_info}/METADATA").decode("utf-8")
    assert "License-Expression: Apache-2.0" in metadata and "License-File: LICENSE" in metadata


def test_importing_engram_loads_no_layer() -> None:
    """`import engram` is cheap: a child process that needs one domain module pays for that only."""
    code = (
        "import sys, engram, engram.domain.decay\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('engram.'))\n"
        "print(','.join(loaded))\n"
        "print(engram.open.__module__, engram.NoteInput.__name__, engram.DomainError.__name__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.splitlines()
    assert set(out[0].split(",")) <= {"engram.domain", "engram.domain.decay"}
    assert out[1] == "engram.services.api NoteInput DomainError"


def test_the_settings_and_the_embedder_import_without_the_event_store_library() -> None:
    """The mem0 side of `engram bench memory` embeds with Engram's MiniLM adapter in mem0's own
    virtualenv, which has no eventsourcing."""
    code = (
        "import sys\n"
        "sys.modules['eventsourcing'] = None  # importing it raises ImportError\n"
        "from engram.adapters.embedders.offline_minilm import MiniLMEmbedder\n"
        "from engram.services.config import Settings\n"
        "print(MiniLMEmbedder.__name__, Settings.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["MiniLMEmbedder", "Settings"]


def test_the_readme_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Python API", 1)[1]
    [example] = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], flags=re.DOTALL)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ENGRAM_LLM", "none")
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    exec(compile(example, "README.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    note_id, position = out[0].split()
    assert len(note_id) == 36 and int(position) > 0
    assert out[1] == "<memory>Planted tomatoes with Mina</memory>"
    score, action = out[2].split(" ", 1)
    assert float(score) > 0 and action == "Planted tomatoes with Mina"
    assert any(line.startswith("- 2026-05-02") for line in out)
    assert out[-1].startswith("[") and "Noted" in out[-1]
