"""A process that owns the embedded vector index under argv[1] until its stdin closes.

The contract suite runs against `SharedEdgeVectorIndex` in the test process, which then reaches the
index through this process (conftest's `edge-shared` adapter); `tests/integration` uses it as an
owner to stop (SIGSTOP) or kill (SIGKILL).
"""

from __future__ import annotations

import sys
from pathlib import Path

from engram.adapters.logging import configure_logging
from engram.adapters.vectors import SharedEdgeVectorIndex
from engram.adapters.vectors.ownership import set_role
from tests.contract.conftest import EDGE_TEST_INDEXING_THRESHOLD_KB


def main() -> None:
    configure_logging("warning")  # on stderr: stdout says when the owner is ready
    set_role("contract-owner")
    index = SharedEdgeVectorIndex(Path(sys.argv[1]), indexing_threshold_kb=EDGE_TEST_INDEXING_THRESHOLD_KB)
    index.collection_exists("probe")  # the first call decides: nobody holds the index, so this process
    assert index.owns, "another process owns the index"
    sys.stdout.write("owner ready\n")
    sys.stdout.flush()
    sys.stdin.read()
    index.close()


if __name__ == "__main__":
    main()
