"""One writer per run folder: OUT/.lock, held with an advisory ``flock`` for the whole run.

Shards of one run (``--shard r/n``) share OUT/.lock and each holds its own
OUT/.lock.shard-r-of-n exclusively: shards run side by side, but never two copies of one
shard, and never a shard beside an unsharded run or ``eval finish``.

The file names its owner (pid, host, start time) so a second run on the same ``--out`` can
say who holds it, and either stop at once or wait (``--wait``). The kernel drops a flock
when its process dies, however it dies, so a lock file left behind by a killed run holds no
lock: the next run takes it over and warns that it did. On release the file is removed; a
run that opened the old file just before that notices (the path names another file now)
and tries again, so two runs can never both believe they hold OUT.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import sys
import time
from pathlib import Path

from eval.errors import DATA, EvalInputError

log = logging.getLogger(__name__)
LOCK = ".lock"


def _owner_text(fd: int) -> dict:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = os.read(fd, 4096)
        owner = json.loads(data.decode("utf-8")) if data.strip() else {}
        return owner if isinstance(owner, dict) else {}
    except (OSError, ValueError):
        return {}


def _describe(owner: dict) -> str:
    if not owner:
        return "another run"
    since = f", since {owner['started']}" if owner.get("started") else ""
    return f"another run (pid {owner.get('pid', '?')} on host {owner.get('host', '?')}{since})"


class RunLock:
    """Exclusive hold of a run folder.

    Args:
        out_dir: the run folder (created if missing).
        wait: block until the holder finishes instead of failing at once.
        name: the lock file's name in ``out_dir``.
        shared: take a shared lock (shards of one run) instead of an exclusive one.
    Raises (on ``acquire``):
        EvalInputError: another live run holds the folder and ``wait`` is False.
    """

    def __init__(self, out_dir: str | Path, wait: bool = False, name: str = LOCK, shared: bool = False):
        self.out_dir = Path(out_dir)
        self.path = self.out_dir / name
        self.wait, self.shared = wait, shared
        self._fd: int | None = None

    def acquire(self) -> "RunLock":
        self.out_dir.mkdir(parents=True, exist_ok=True)
        told = False
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            mode = fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = _owner_text(fd)
                if not self.wait:
                    os.close(fd)
                    raise EvalInputError([f"ERROR --out {self.out_dir}: {_describe(owner)} is writing there; "
                                          "wait for it with --wait, or use another --out"], DATA) from None
                if not told:
                    print(f"waiting for {_describe(owner)} to finish with {self.out_dir} ...", file=sys.stderr,
                          flush=True)
                    told = True
                try:
                    fcntl.flock(fd, mode)
                except BaseException:
                    os.close(fd)
                    raise
            if not self._still_the_lock_file(fd):
                os.close(fd)  # the holder removed it as we waited: lock the new one
                continue
            if self.shared:  # several holders: nobody owns the file's text
                self._fd = fd
                return self
            previous = _owner_text(fd)
            if previous:
                log.warning("%s: taking over a stale lock of pid %s on host %s (that run ended without releasing "
                            "it)", self.path, previous.get("pid", "?"), previous.get("host", "?"))
            me = {"pid": os.getpid(), "host": socket.gethostname(),
                  "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, (json.dumps(me) + "\n").encode())
            self._fd = fd
            return self

    def _still_the_lock_file(self, fd: int) -> bool:
        try:
            return os.fstat(fd).st_ino == os.stat(self.path).st_ino
        except FileNotFoundError:
            return False

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            if not self.shared:
                self.path.unlink(missing_ok=True)  # still holding the flock: nobody else can be its owner
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
