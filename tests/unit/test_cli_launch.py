"""Which commands start loading the offline model before Engram is imported (adapters/cli/launch.py)."""

from __future__ import annotations

import pytest

from engram.adapters.cli.launch import embeds_offline


@pytest.mark.parametrize(
    ("args", "environ", "expected"),
    [
        (["recall", "Aria", "river"], {}, True),
        (["query", "Aria", "what happened", "--k", "5"], {}, True),
        (["--data-dir", "/tmp/d", "recall", "Aria", "x"], {}, True),
        (["--data-dir", "recall", "search", "Aria", "x"], {}, False),  # "recall" is the data dir
        (["demo"], {"ENGRAM_EMBEDDER": "offline"}, True),
        (["recall", "Aria", "x"], {"ENGRAM_EMBEDDER": "openai"}, False),
        (["recall", "Aria", "x"], {"ENGRAM_EMBEDDER": "hashing"}, False),
        (["recall", "--help"], {}, False),
        (["--version"], {}, False),
        (["search", "Aria", "recall"], {}, False),  # a word of the text, not the command
        (["being", "list"], {}, False),
        ([], {}, False),
    ],
)
def test_the_model_is_loaded_early_only_for_commands_that_embed_offline(
    args: list[str], environ: dict[str, str], expected: bool
) -> None:
    assert embeds_offline(args, environ) is expected
