"""Who owns the embedded vector index: the owner lock, what it says about its holder, the shared key.

Qdrant Edge opens a shard in one process only, so one process of a data directory owns the index and
serves it to the others (`shared_edge.py`, ADR 0036). The owner holds a flock on `vectors/owner.lock`
(the operating system releases it when the process dies, however it dies) and writes into that file
who it is: pid, role (`engram serve`, `engram worker`, `engram mcp`, `engram recall`, …), since when,
and the Unix socket it listens on. Other processes read the file to find the owner, and to name it
when it does not answer.

`vectors/owner.key` holds the key both ends prove they know before a connection carries anything
(`multiprocessing.connection`'s challenge): a file readable by its owner only, created once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import sys
import tempfile
import threading
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

LOCK_FILE = "owner.lock"
KEY_FILE = "owner.key"
SOCKET_FILE = "owner.sock"
# sockaddr_un holds 108 bytes with the final NUL; deep data directories get a socket elsewhere.
_MAX_SOCKET_PATH = 100
_KEY_BYTES = 32

# Until `set_role`: the program's name (`app.py`, `pytest`), or `python` for `python -c …`.
_role = Path(sys.argv[0]).name if sys.argv and sys.argv[0] not in ("", "-c", "-m") else "python"
_role_lock = threading.Lock()


def set_role(role: str) -> None:
    """What this process is, as the owner lock tells others (e.g. `engram serve`)."""
    global _role
    with _role_lock:
        _role = role


def current_role() -> str:
    return _role


@dataclass(frozen=True)
class Holder:
    """The process that owns the index, as its lock file says."""

    pid: int
    role: str
    since: str  # ISO 8601, UTC
    address: str

    def describe(self) -> str:
        since = self.since.replace("T", " ").split(".")[0].removesuffix("+00:00")
        return f"`{self.role}` (pid {self.pid}, since {since} UTC)"


def socket_address(root: Path) -> str:
    """Where the owner of the index under `root` listens: `root/owner.sock`, or, when that path is
    too long for a Unix socket, a file named after `root` in a private directory of this user."""
    path = str(Path(root).resolve() / SOCKET_FILE)
    if len(path.encode()) <= _MAX_SOCKET_PATH:
        return path
    private = Path(tempfile.gettempdir()) / f"engram-{os.getuid()}"
    private.mkdir(mode=0o700, exist_ok=True)
    if private.stat().st_uid != os.getuid() or private.stat().st_mode & 0o077:
        raise PermissionError(f"{private} must belong to this user and be private (mode 0700)")
    digest = hashlib.sha256(path.encode()).hexdigest()[:24]
    return str(private / f"{digest}.sock")


def shared_key(root: Path) -> bytes:
    """The key of the index under `root`: read it, or create it (mode 0600) if it is not there yet.

    Created under a temporary name and linked into place, so a process racing to create it reads
    either nothing or the whole key.
    """
    path = Path(root) / KEY_FILE
    with contextlib.suppress(FileNotFoundError):
        return _read_key(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".owner.key.", dir=path.parent)  # mkstemp creates it 0600
    try:
        os.write(fd, os.urandom(_KEY_BYTES))
        os.fsync(fd)
        os.close(fd)
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        os.unlink(tmp)
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    key = path.read_bytes()
    if len(key) != _KEY_BYTES:
        raise ValueError(f"{path} does not hold a {_KEY_BYTES}-byte key; delete it and retry")
    return key


class OwnerLock:
    """The flock on `root/owner.lock`, and the holder record inside it."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / LOCK_FILE
        self._fd: int | None = None
        self._mutex = threading.Lock()

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        """Take the lock if no process holds it; never waits."""
        return self._acquire(fcntl.LOCK_EX | fcntl.LOCK_NB)

    def wait_acquire(self) -> bool:
        """Take the lock, waiting for as long as another process holds it (False if this object
        already holds it). Each attempt opens the file anew: a flock belongs to an open file, so two
        threads of this process waiting on two files exclude each other too."""
        return self._acquire(fcntl.LOCK_EX)

    def _acquire(self, operation: int) -> bool:
        if self._fd is not None:
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, operation)
        except BlockingIOError:
            os.close(fd)
            return False
        with self._mutex:
            if self._fd is None:
                self._fd = fd
                return True
        os.close(fd)  # another thread of this process took it meanwhile
        return False

    def publish(self, holder: Holder) -> None:
        """Say who holds the lock (once listening): readers see the old record, nothing, or this one."""
        assert self._fd is not None, "publish() needs the lock"
        data = json.dumps(asdict(holder)).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def release(self) -> None:
        with self._mutex:
            fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)  # nobody to talk to any more: readers try the lock instead
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def holder(self) -> Holder | None:
        """The record of the process holding the lock, or None while there is none (or it is being
        written). A record left by a holder that died is returned too: its socket refuses."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            fields = json.loads(raw)
            return Holder(
                pid=int(fields["pid"]),
                role=str(fields["role"]),
                since=str(fields["since"]),
                address=str(fields["address"]),
            )
        except (ValueError, KeyError, TypeError):
            return None


def new_holder(address: str) -> Holder:
    return Holder(pid=os.getpid(), role=current_role(), since=datetime.now(UTC).isoformat(), address=address)


def is_stopped(pid: int) -> bool:
    """Whether `pid` is stopped (SIGSTOP, a debugger): state T or t in /proc (Linux; False elsewhere)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state follows the command name, which is in parentheses and may hold spaces.
    return stat.rpartition(")")[2].split()[:1] in (["T"], ["t"])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def unresponsive_message(root: Path, holder: Holder | None) -> str:
    """One line: what holds the index under `root`, that it does not answer, and what to do."""
    where = f"the embedded vector index under {root}"
    # No record, or that of an owner that died: the process that took the lock since is silent.
    if holder is None or not _alive(holder.pid):
        return (
            f"{where} is locked by a process that has not said who it is ({Path(root) / LOCK_FILE}); "
            "retry, and if this persists, end the other Engram processes of this data directory"
        )
    pid = holder.pid
    if is_stopped(pid):
        return (
            f"{where} is held by {holder.describe()}, which is stopped and does not answer: "
            f"resume it (kill -CONT {pid}) or end it (kill {pid}), then retry"
        )
    return (
        f"{where} is held by {holder.describe()}, which does not answer: if it is hung, end it "
        f"(kill {pid}; another process then takes the index over) and retry"
    )
