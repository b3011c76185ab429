"""The server's snapshot store: snapshots stay on the server, clients hold random ids.

A token is 32 random URL-safe characters naming one stored snapshot; it says nothing
about the snapshot (a task's hidden tests or gold answer never leave the server), cannot
be forged (2**192 ids), and the bytes it names are the server's own ``Snapshot.to_bytes``
output, so nothing a client sends is ever unpickled.

Trust model: a snapshot belongs to the session that took it. Another session's token is
refused, and a session's snapshots are dropped when it ends, unless the store is
``shared`` (``agentenvs serve --share-snapshots``): then any session of the server may
restore any token, and snapshots outlive their session, so many clients can branch from
one state (tree search, restarts from a common prefix).

Bounds: at most ``max_count`` snapshots and ``max_bytes`` of their bytes in all; a
snapshot unused for ``ttl`` seconds expires. Storing past a bound drops the least
recently used snapshot: the storing session's own while it holds more than its share
(``fair_count``), else the server's oldest. A dropped or expired token is refused with a
message that says so. Keeping snapshots on the server costs memory (1-40 KB each for the
bundled envs, so the default 256 MiB holds thousands) where signed or encrypted tokens
would cost none, but tokens stay short and no key or cipher is trusted with the payload.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from agentenvs.core.snapshot import Snapshot
from agentenvs.server.protocol import SessionError

#: a token is this many random bytes, URL-safe base64 (32 characters)
TOKEN_BYTES = 24
_MAX_TOKEN_CHARS = 256


@dataclass
class _Entry:
    owner: str
    data: bytes
    used: float


class SnapshotStore:
    """Snapshots by token, bounded in count, bytes and age."""

    def __init__(
        self,
        *,
        max_count: int = 4096,
        max_bytes: int = 256 << 20,
        ttl: float | None = 3600.0,
        shared: bool = False,
        fair_count: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_count < 1 or max_bytes < 1:
            raise ValueError("max_count and max_bytes must be positive")
        if ttl is not None and ttl <= 0:
            raise ValueError(f"ttl must be positive (or None: no expiry), got {ttl}")
        self.max_count = int(max_count)
        self.max_bytes = int(max_bytes)
        self.ttl = ttl
        self.shared = bool(shared)
        self.fair_count = max(1, int(fair_count or max_count))
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()  # least recently used first
        self._owned: dict[str, int] = {}
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, owner: str, snapshot: Snapshot) -> str:
        """Keep ``snapshot`` for ``owner``; its token."""
        data = snapshot.to_bytes()
        if len(data) > self.max_bytes:
            raise SessionError(
                f"the snapshot is {len(data)} bytes, more than the server keeps for all "
                f"snapshots ({self.max_bytes})"
            )
        self._expire()
        while len(self._entries) >= self.max_count or self.nbytes + len(data) > self.max_bytes:
            self._drop(self._victim(owner))
        token = secrets.token_urlsafe(TOKEN_BYTES)
        self._entries[token] = _Entry(owner, data, self._clock())
        self._owned[owner] = self._owned.get(owner, 0) + 1
        self.nbytes += len(data)
        return token

    def get(self, owner: str, token: object) -> Snapshot:
        """The snapshot ``token`` names, if ``owner`` may restore it; ``SessionError`` if not.
        Ownership is checked before the bytes are decoded."""
        if not isinstance(token, str) or not token or len(token) > _MAX_TOKEN_CHARS:
            raise SessionError(
                'a snapshot token is the string a "snapshot" message answered', "VALIDATION_ERROR"
            )
        entry = self._entries.get(token)
        if entry is not None and self._expired(entry):
            self._drop(token)
            entry = None
        if entry is None:
            raise SessionError(
                "the snapshot token was not issued by this server, or its snapshot is gone "
                f"(unused for {self.ttl} s, pushed out by newer ones past {self.max_count} "
                "snapshots or the memory bound, or dropped when its session ended)",
                "VALIDATION_ERROR",
            )
        if not self.shared and entry.owner != owner:
            raise SessionError(
                "the snapshot belongs to another session; a server started with "
                "--share-snapshots restores snapshots into any session",
                "VALIDATION_ERROR",
            )
        entry.used = self._clock()
        self._entries.move_to_end(token)
        return Snapshot.from_bytes(entry.data)

    def drop_owner(self, owner: str) -> None:
        """Forget ``owner``'s snapshots (its session ended), unless the store is shared."""
        if self.shared or not self._owned.get(owner):
            return
        for token in [t for t, e in self._entries.items() if e.owner == owner]:
            self._drop(token)

    def _expired(self, entry: _Entry) -> bool:
        return self.ttl is not None and self._clock() - entry.used > self.ttl

    def _expire(self) -> None:
        while self._entries:
            token, entry = next(iter(self._entries.items()))
            if not self._expired(entry):
                return
            self._drop(token)

    def _victim(self, owner: str) -> str:
        if self._owned.get(owner, 0) >= self.fair_count:
            for token, entry in self._entries.items():
                if entry.owner == owner:
                    return token
        return next(iter(self._entries))

    def _drop(self, token: str) -> None:
        entry = self._entries.pop(token)
        self.nbytes -= len(entry.data)
        left = self._owned[entry.owner] - 1
        if left:
            self._owned[entry.owner] = left
        else:
            del self._owned[entry.owner]


__all__ = ["TOKEN_BYTES", "SnapshotStore"]
