"""`python -m bench NAME …` from the repository root: the same commands as `engram bench NAME …`."""

from __future__ import annotations

import sys

from engram.adapters.cli.main import cli

cli(["bench", *sys.argv[1:]], prog_name="python -m")  # usage lines read `python -m bench NAME`
