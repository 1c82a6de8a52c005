"""Child process for the migration-kill test: re-embeds with hashing-64 in batches of 2 and SIGKILLs
itself once the first batch is saved, as a kill in the middle of `engram embeddings migrate` would."""

from __future__ import annotations

import os
import signal
import sys

from engram.adapters.embedders.hashing import HashingEmbedder
from engram.services.bootstrap import bootstrap
from engram.services.config import Settings
from engram.services.embedding_migration import EmbeddingMigration


def main() -> None:
    e = bootstrap(Settings.model_validate_json(sys.argv[1]))

    def die(kind: str, done: int, total: int) -> None:
        print(f"{kind} {done}/{total}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    EmbeddingMigration(e, HashingEmbedder(dim=64)).run(progress=die, batch=2)
    print("not killed", flush=True)


if __name__ == "__main__":
    main()
