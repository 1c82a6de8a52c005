"""The `engram` command line (`main.py`).

structlog, which every module logs through, imports rich's pretty tracebacks and pygments when rich
is installed: a tenth of a second of every command's start, for tracebacks that Engram never prints
(they show local variables, which may hold secrets: `adapters/logging.py` renders plain ones). The
command line is a process of its own, so it lets structlog find rich missing; rich itself (the
progress bars of `projections rebuild`) still imports as usual afterwards.
"""

import sys

if "structlog" not in sys.modules and "rich" not in sys.modules:
    sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich` raises ImportError
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]
