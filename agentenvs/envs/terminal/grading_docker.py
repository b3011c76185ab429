"""Safe grading on the ``docker`` runtime: the grader's view of a frozen task container.

Once the engine has stopped every process of the agent's container (``DockerRuntime.
freeze``), the grader reads what changed against the image from the engine's diff (or the
container's overlay2 upper dir, where this host holds it), reads and writes files through
the engine, compares the dynamic loader's cache with the image's, and opens its own
session in the container, which no process of the agent ever held.
"""

from __future__ import annotations

import io
import os
import posixpath
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Sequence
from typing import Any, Protocol

from agentenvs.core.errors import SandboxError
from agentenvs.envs.terminal.data import TerminalTask
from agentenvs.envs.terminal.grading import _STDLIB
from agentenvs.envs.terminal.shell import ShellSession
from agentenvs.envs.terminal.verifier.tree import MOUNT
from agentenvs.sandbox.docker import _Container


class FreezingRuntime(Protocol):
    """What the grader's view asks of the runtime that froze the container
    (``runtime_docker.DockerRuntime``)."""

    client: Any

    def _shell_in(self, box: Any, key: Any) -> ShellSession: ...

    def profile(
        self, task: TerminalTask, dirs: Sequence[str]
    ) -> tuple[dict[str, frozenset[str]], bytes]: ...


#: paths the engine creates in every container (Docker's init, bound in by ``init=True``)
ENGINE_PATHS = ("/sbin/docker-init", "/usr/sbin/docker-init", "/usr/bin/docker-init")


def _read_file(api: Any, container: str, path: str) -> bytes | None:
    """A regular file of a container (running or stopped) read through the engine, or None."""
    try:
        stream, _ = api.get_archive(container, path)
        data = b"".join(stream)
    except Exception:
        return None
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        members = tar.getmembers()
        if len(members) != 1 or not members[0].isfile():
            return None
        f = tar.extractfile(members[0])
        return f.read() if f is not None else None


def _loader_map(cache: bytes) -> dict[tuple[str, str], str] | None:
    """soname and flags -> the path the loader's cache gives first (the host's ldconfig
    reads the file; None when it cannot)."""
    ldconfig = shutil.which("ldconfig", path="/usr/sbin:/sbin:/usr/bin:/bin")
    if ldconfig is None or not cache:
        return None
    with tempfile.NamedTemporaryFile(prefix="agentenvs-ldcache-") as f:
        f.write(cache)
        f.flush()
        try:
            out = subprocess.run(
                [ldconfig, "-p", "-C", f.name], capture_output=True, timeout=30, check=False
            ).stdout.decode(errors="replace")
        except (OSError, subprocess.SubprocessError):
            return None
    found: dict[tuple[str, str], str] = {}
    for line in out.splitlines()[1:]:
        head, sep, path = line.strip().rpartition(" => ")
        if sep:
            soname, _, flags = head.partition(" ")
            found.setdefault((soname, flags), path)
    return found


def container_changes(api: Any, container: str) -> list[tuple[str, str]]:
    """What changed in a container against its image: (path, "A"|"C"|"D"), as the
    engine's diff gives it. Read from the container's overlay2 upper dir when this host
    holds it (the engine's own diff may walk the whole filesystem: about 2 s a container
    here), else asked of the engine."""
    try:
        driver = api.inspect_container(container).get("GraphDriver") or {}
    except Exception as exc:
        raise SandboxError(f"cannot inspect container {container[:12]}: {exc}") from exc
    data = driver.get("Data") or {}
    if driver.get("Name") == "overlay2" and data.get("UpperDir") and data.get("LowerDir"):
        lowers = [d for d in data["LowerDir"].split(":") if not d.endswith("-init/diff")]
        found = _overlay_changes(data["UpperDir"], lowers)
        if found is not None:
            return found
    try:
        diff = api.diff(container) or []
    except Exception as exc:
        raise SandboxError(f"cannot read the changes of {container[:12]}: {exc}") from exc
    kinds = {0: "C", 1: "A", 2: "D"}
    return [(d["Path"], kinds.get(d["Kind"], "C")) for d in diff]


def _overlay_changes(upper: str, lowers: Sequence[str]) -> list[tuple[str, str]] | None:
    """The changes an overlay2 upper dir holds over its lower dirs (None: unreadable).

    A whiteout (a 0:0 character device) is a deletion; an opaque dir deletes what the
    lower dirs held below it; a dir the lower dirs have is only there for what changed
    below it (not listed); any other entry is a change where a lower dir has the path,
    else an addition. No link is followed.
    """
    import stat

    if not os.access(upper, os.R_OK | os.X_OK):
        return None

    def in_lower(rel: str) -> bool:
        return any(os.path.lexists(os.path.join(d, rel)) for d in lowers)

    out: list[tuple[str, str]] = []
    try:
        for root, dirs, files in os.walk(upper, followlinks=False):
            rel_root = os.path.relpath(root, upper)
            if rel_root != ".":
                try:
                    opaque = os.getxattr(root, "trusted.overlay.opaque") == b"y"
                except OSError:
                    opaque = False
                if opaque:
                    mine = set(dirs) | set(files)
                    for d in lowers:
                        lower = os.path.join(d, rel_root)
                        if os.path.isdir(lower) and not os.path.islink(lower):
                            out += [
                                ("/" + os.path.join(rel_root, n), "D")
                                for n in os.listdir(lower)
                                if n not in mine
                            ]
            for name in [*dirs, *files]:
                rel = name if rel_root == "." else os.path.join(rel_root, name)
                st = os.lstat(os.path.join(root, name))
                if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                    out.append(("/" + rel, "D"))
                elif stat.S_ISDIR(st.st_mode) and in_lower(rel):
                    continue  # a dir copied up for what changed below it (or its times)
                else:
                    out.append(("/" + rel, "C" if in_lower(rel) else "A"))
    except OSError:
        return None
    return sorted(set(out))


class DockerFrozen:
    """The grader's view of a frozen task container: the engine's diff, its files through
    the engine, and a new session in it that no process of the agent held."""

    def __init__(
        self,
        runtime: FreezingRuntime,
        task: TerminalTask,
        box: _Container,
        key: tuple[Any, ...],
        stopped: int,
    ) -> None:
        self.runtime = runtime
        self.task = task
        self.box = box
        self.key = key
        self.stopped = stopped
        entries = container_changes(runtime.client.api, box.id)
        # a dir shows as changed when something below it is: only its entries count
        parents = {posixpath.dirname(p) for p, _ in entries}
        self.changes = [(p, k) for p, k in entries if not (k == "C" and p in parents)]
        self.image_commands: dict[str, frozenset[str]] | None = None
        #: what the engine itself puts in every container
        self.ignore = ENGINE_PATHS
        self._cache: bytes = b""
        #: opened only once the toolchain is known to be the image's (its shell is ``sh``)
        self.shell: ShellSession | None = None

    #: the verifier's interpreter as the container sees it (set by ``freeze``)
    python: str = ""

    def open(self) -> ShellSession:
        if self.shell is None:
            self.shell = self.runtime._shell_in(self.box, self.key)
        return self.shell

    def channel_dir(self, stage: Any) -> str:
        """The host dir shown at the tree's ``channel/`` in this container."""
        assert self.box.host_dir is not None
        return os.path.join(self.box.host_dir, "v", "channel")

    def trusted(self, pid: int, maps: list[str]) -> str | None:
        """Why a process of this container runs code the agent could have changed (None:
        it does not): its executable or a file it maps differs from the image (the
        engine's account of the container's changes, read now), or the standard library
        of its interpreter does."""
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError as exc:
            return f"cannot read its executable: {exc}"
        from agentenvs.envs.terminal.verifier.channel import same_file

        if not same_file(pid, exe, self.python):
            return f"its executable {exe} is not the verifier's interpreter"
        try:
            changed = {p for p, _ in container_changes(self.runtime.client.api, self.box.id)}
        except SandboxError as exc:
            return f"cannot read the container's changes: {exc}"
        for path in [exe, *maps]:
            if path.endswith(" (deleted)"):
                return f"it maps a deleted file {path}"
            if path.startswith(MOUNT + "/"):
                continue
            if path in changed:
                return f"it runs {path}, a file the agent changed"
        for path in changed:
            if _STDLIB.match(path) and "-packages" not in path:
                return f"the standard library changed ({path})"
        return None

    def use_profile(self, dirs: Sequence[str]) -> None:
        self.image_commands, self._cache = self.runtime.profile(self.task, dirs)

    def read(self, path: str) -> bytes | None:
        return _read_file(self.runtime.client.api, self.box.id, path)

    def fetch(self, path: str) -> bytes | None:
        """The file now (the container is stopped when the grader reads its verdict)."""
        return self.read(path)

    def loader_cache_ok(self) -> bool:
        before = _loader_map(self._cache)
        after = _loader_map(self.read("/etc/ld.so.cache") or b"")
        if before is None or after is None:
            return False
        return all(after.get(k) == v for k, v in before.items())

    def put(self, archive: bytes) -> None:
        try:
            self.runtime.client.api.put_archive(self.box.id, "/", archive)
        except Exception as exc:
            raise SandboxError(f"cannot copy the tests into {self.box.short}: {exc}") from exc

    def archive(self, path: str) -> bytes:
        try:
            stream, _ = self.runtime.client.api.get_archive(self.box.id, path)
            return b"".join(stream)
        except Exception as exc:
            raise SandboxError(f"cannot read {path} of {self.box.short}: {exc}") from exc

    def stop(self) -> int:
        """Stop what the tests left running (programs of the agent they started) before
        the verdict is read: the engine kills every process of the container."""
        if self.shell is not None:
            self.shell.close()
            self.shell = None
        self.runtime._restart(self.box, start=False)
        self._stopped = True
        return 0

    def resume(self) -> ShellSession:
        """The container running again, the grader's session in it (for what may follow:
        the final state's key, a snapshot)."""
        if getattr(self, "_stopped", False):
            try:
                self.runtime.client.api.start(self.box.id)
            except Exception as exc:
                raise SandboxError(f"cannot start container {self.box.short}: {exc}") from exc
            self._stopped = False
        return self.open()
