"""The `engram` console script: starts loading the embedding model early, then runs the command line.

A one-shot `engram recall` or `engram query` spends about half a second importing Engram and as long
loading the offline MiniLM model. The two are independent, and onnxruntime releases the GIL while it
loads, so the load starts on a thread first, when the command will embed text with the offline
embedder, and the imports run beside it (docs/decisions/0045). Everything else is `main.py`'s.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

EMBEDDING_COMMANDS = frozenset({"recall", "query", "demo"})
"""Commands that embed text on every run; the others load the model only if they need it."""


def main() -> None:
    if embeds_offline(sys.argv[1:], os.environ):
        from engram.adapters.embedders.minilm_model import load_in_background

        load_in_background()
    from engram.adapters.cli.main import main as run

    run()


def embeds_offline(args: Sequence[str], environ: Mapping[str, str]) -> bool:
    """Whether the command in `args` will embed text with the offline embedder.

    A guess made before the settings are read, so it errs towards not loading: a help page, an
    unknown command or another configured embedder loads nothing here. A wrong "yes" costs a
    thread's work that the process throws away when it ends.
    """
    if environ.get("ENGRAM_EMBEDDER", "offline") != "offline":
        return False
    if any(arg in ("-h", "--help", "--version") for arg in args):
        return False
    rest = iter(args)
    for arg in rest:
        if arg == "--data-dir":
            next(rest, None)
        elif not arg.startswith("-"):
            return arg in EMBEDDING_COMMANDS
    return False
