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
import shlex
import shutil
import tarfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentenvs.core.errors import SandboxError
from agentenvs.envs.terminal.copies import RESULT_BYTES, OverLimit
from agentenvs.envs.terminal.data import DEFAULT_PATH, TerminalTask
from agentenvs.envs.terminal.grading import STDLIB
from agentenvs.envs.terminal.shell import ShellSession
from agentenvs.envs.terminal.task_container import _ShellProcess, _TaskContainer
from agentenvs.envs.terminal.verifier import tree as verifier_tree
from agentenvs.envs.terminal.verifier.tree import MOUNT
from agentenvs.sandbox.docker import DockerProcess, _Container


class FreezingRuntime(Protocol):
    """What the grader's view asks of the runtime that froze the container
    (``runtime_docker.DockerRuntime``)."""

    client: Any

    def _shell_in(self, box: Any, key: Any) -> ShellSession: ...


def _read_file(api: Any, container: str, path: str, limit: int = RESULT_BYTES) -> bytes | None:
    """A regular file of a container (running or stopped) read through the engine, or
    None; ``OverLimit`` when the engine's stat of it says it is past ``limit`` bytes
    (apparent size), before any of it is read."""
    try:
        stream, found = api.get_archive(container, path)
    except Exception:
        return None
    size = (found or {}).get("size")
    if not isinstance(size, int) or size > limit:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
        if not isinstance(size, int):
            return None
        raise OverLimit("bytes", size, limit, f"the verdict file {path}")
    chunks, got = [], 0
    try:
        for chunk in stream:  # a tar of the one file: its headers, data and end blocks
            got += len(chunk)
            if got > limit + (64 << 10):
                raise OverLimit("bytes", got, limit, f"the verdict file {path} (grown)")
            chunks.append(chunk)
    except OverLimit:
        raise
    except Exception:
        return None
    with tarfile.open(fileobj=io.BytesIO(b"".join(chunks)), mode="r:") as tar:
        members = tar.getmembers()
        if len(members) != 1 or not members[0].isfile():
            return None
        f = tar.extractfile(members[0])
        return f.read(limit + 1) if f is not None else None


def _link(src: str, dst: str) -> None:
    """A hard link where the filesystem allows, else a copy."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _shared_object(path: str) -> bool:
    name = posixpath.basename(path)
    return name.endswith(".so") or ".so." in name or name.startswith("ld-linux")


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


def _open_dir(name: str, dir_fd: int | None) -> int | None:
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError:
        return None


def _overlay_changes(
    upper: str, lowers: Sequence[str], links: dict[str, str] | None = None
) -> list[tuple[str, str]] | None:
    """The changes an overlay2 upper dir holds over its lower dirs (None: unreadable).

    A whiteout (a 0:0 character device) is a deletion; an opaque dir deletes what the
    lower dirs held below it; a dir the lower dirs have is only there for what changed
    below it (not listed); any other entry is a change where a lower dir has the path,
    else an addition. No link is followed (``links``, when given, gets each symlink the
    upper dir holds, path -> target). The walk is iterative and holds a directory
    descriptor for each dir (the upper's and each lower's at the same place), so neither
    depth nor path length matters: whatever tree the agent made is read.
    """
    import stat

    top = _open_dir(upper, None)
    if top is None:
        return None
    out: list[tuple[str, str]] = []
    # (upper dir fd, the lower dirs' fds at the same path, that path)
    stack: list[tuple[int, list[int], str]] = [
        (top, [fd for d in lowers if (fd := _open_dir(d, None)) is not None], "")
    ]
    try:
        while stack:
            fd, lower_fds, rel = stack.pop()
            try:
                try:
                    opaque = rel != "" and os.getxattr(fd, "trusted.overlay.opaque") == b"y"
                except OSError:
                    opaque = False
                names = sorted(os.listdir(fd))
                if opaque:
                    mine = set(names)
                    for lower in lower_fds:
                        out += [(f"{rel}/{n}", "D") for n in os.listdir(lower) if n not in mine]
                for name in names:
                    path = f"{rel}/{name}"
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    below = []
                    for lower in lower_fds:
                        try:
                            below.append(os.stat(name, dir_fd=lower, follow_symlinks=False))
                        except OSError:
                            pass
                    if links is not None and stat.S_ISLNK(st.st_mode):
                        links[path] = os.readlink(name, dir_fd=fd)
                    if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                        out.append((path, "D"))
                    elif stat.S_ISDIR(st.st_mode):
                        if not any(stat.S_ISDIR(b.st_mode) for b in below):
                            out.append((path, "C" if below else "A"))
                        sub = _open_dir(name, fd)
                        if sub is None:
                            raise OSError(f"cannot open {path}")
                        subs = []
                        for lower in lower_fds:
                            if (low := _open_dir(name, lower)) is not None:
                                subs.append(low)
                        stack.append((sub, subs, path))
                    else:
                        out.append((path, "C" if below else "A"))
            finally:
                os.close(fd)
                for lower in lower_fds:
                    os.close(lower)
    except OSError:
        for fd, lower_fds, _ in stack:
            for d in (fd, *lower_fds):
                os.close(d)
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

    def trusted(self, pid: int, maps: list[str] | None) -> str | None:
        """Why a process of this container runs code the agent could have changed (None:
        it does not): its executable or a file it maps differs from the image (the
        engine's account of the container's changes, read now), or the standard library
        of its interpreter does. Where this process may not read the container's
        processes (the engine run by a user, not root), what they map is not known: then
        no shared library, loader file, interpreter or standard-library file of the image
        may have changed (honest changes to libraries are graded only as root)."""
        try:
            changed = {p for p, _ in container_changes(self.runtime.client.api, self.box.id)}
        except SandboxError as exc:
            return f"cannot read the container's changes: {exc}"
        for path in changed:
            if STDLIB.match(path) and "-packages" not in path:
                return f"the standard library changed ({path})"
        if maps is None:
            for path in sorted(changed):
                if path == self.python or path.startswith("/etc/ld.so") or _shared_object(path):
                    return f"{path} changed (the processes' maps cannot be read as this user)"
            return None
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError as exc:
            return f"cannot read its executable: {exc}"
        from agentenvs.envs.terminal.verifier.channel import same_file

        if not same_file(pid, exe, self.python):
            return f"its executable {exe} is not the verifier's interpreter"
        for path in [exe, *maps]:
            if path.endswith(" (deleted)"):
                return f"it maps a deleted file {path}"
            if path.startswith(MOUNT + "/"):
                continue
            if path in changed:
                return f"it runs {path}, a file the agent changed"
        return None

    def links(self) -> dict[str, str]:
        """The symlinks the agent made (path -> target), from the container's overlay upper
        dir where this host holds it (else none are known)."""
        try:
            driver = self.runtime.client.api.inspect_container(self.box.id).get("GraphDriver")
        except Exception as exc:
            raise SandboxError(f"cannot inspect container {self.box.short}: {exc}") from exc
        data = (driver or {}).get("Data") or {}
        if (driver or {}).get("Name") != "overlay2" or not data.get("UpperDir"):
            return {}
        lowers = [d for d in (data.get("LowerDir") or "").split(":") if d]
        found: dict[str, str] = {}
        _overlay_changes(data["UpperDir"], lowers, found)
        return found

    def read(self, path: str) -> bytes | None:
        return _read_file(self.runtime.client.api, self.box.id, path)

    def fetch(self, path: str) -> bytes | None:
        """The file now (the container is stopped when the grader reads its verdict)."""
        return self.read(path)

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


#: (image, task id, exec environment, shell init text, output cap, network, work dir)
_SpareKey = tuple[str, str, tuple[tuple[str, str], ...], str, int, str, str]
#: a task container's own processes: docker-init, its sleep, the shell supervisor, the
#: subshell holding the agent's bash, and that bash
_OWN_PROCESSES = ("docker-init", "sleep", "sh", "sh", "bash")


class FreezingDocker:
    """The docker runtime's part in safe grading (a base of ``DockerRuntime``): the freeze,
    the verifier's mounts filled while the container is stopped, the image's interpreter
    and environment for the verifier, and the grader's session."""

    client: Any
    wheelhouse: Path | None
    _current: Any
    _current_key: Any
    _pythons: dict[str, str]
    #: per image: a host dir of the verifier's packages' bytecode for its interpreter
    _bytecode: dict[str, str | None]

    if TYPE_CHECKING:

        def image(self, task: TerminalTask) -> str: ...
        def image_config(self, task: TerminalTask) -> dict[str, Any]: ...
        def _start(
            self, image: str, task_id: str, network: str, *, services: bool = True
        ) -> Any: ...
        def _discard(self, box: Any) -> None: ...

    def _shell_in(self, box: _TaskContainer, key: _SpareKey) -> ShellSession:
        _, _, env, init, max_output_bytes, _, workdir = key

        def spawn(argv: Sequence[str]) -> DockerProcess:
            return _ShellProcess(box, argv, user="0:0", env=dict(env), workdir=workdir)

        return ShellSession(spawn, init=init, max_output_bytes=max_output_bytes, workdir=workdir)

    def verifier_session(self, task: TerminalTask) -> ShellSession | None:
        """A new session in the current container as the task's ``[verifier] user``
        (``docker exec --user``, as Harbor runs the test script), for the tests under
        official grading; ``/logs/verifier`` made writable to that user first, as Harbor's
        mounted one is. None where the tests run as root (no such user, or root's name)."""
        from agentenvs.envs.terminal.runtime_docker import ROOT_USERS

        if task.verifier_user is None or task.verifier_user in ROOT_USERS:
            return None
        box, key = self._current, self._current_key
        if box is None or key is None:
            raise SandboxError("no container to run the tests in")
        _, _, env, _, max_output_bytes, _, workdir = key
        rc, out, _, _, _ = box.exec(
            ["sh", "-c", "mkdir -p /logs/verifier && chmod 0777 /logs/verifier"],
            user="0:0",
            timeout=60,
        )
        if rc != 0:
            raise SandboxError(f"cannot prepare /logs/verifier: {out.decode(errors='replace')}")
        user = task.verifier_user

        def spawn(argv: Sequence[str]) -> DockerProcess:
            return _ShellProcess(box, argv, user=user, env=dict(env), workdir=workdir)

        return ShellSession(spawn, init="", max_output_bytes=max_output_bytes, workdir=workdir)

    def _restart(self, box: _TaskContainer, *, start: bool = True) -> None:
        """Kill every process of ``box`` through the engine (its files stay), then start
        it again: nothing inside can outlive or refuse this."""
        api = self.client.api
        try:
            try:
                api.kill(box.id)
            except Exception:  # noqa: BLE001 - already stopped
                pass
            else:
                box.own_kills += 1
            api.wait(box.id, timeout=60)
            if start:
                api.start(box.id)
        except Exception as exc:
            raise SandboxError(f"cannot restart container {box.short}: {exc}") from exc

    def freeze(
        self,
        task: TerminalTask,
        shell: ShellSession,
        reopen: Callable[[], ShellSession],
        stage: Any = None,
    ) -> DockerFrozen:
        """Stop every process of the agent's container (the engine kills it; its files
        stay), start it again and open the grader's session in it. With a verifier
        ``stage``: the container's read-only dirs get the verifier's tree (for the image's
        interpreter) and the task's tests while it is stopped."""
        box, key = self._current, self._current_key
        if box is None or key is None:
            raise SandboxError("no container to grade")
        if box.disk is not None:  # an end state past the disk cap is the agent's loss
            box.disk.check()
        api = self.client.api
        try:
            listed = api.top(box.id).get("Processes") or []
        except Exception as exc:
            raise SandboxError(f"cannot list the processes of {box.short}: {exc}") from exc
        shell.close()
        self._restart(box, start=False)
        python = ""
        if stage is not None:
            if box.host_dir is None:
                raise SandboxError(f"container {box.short} has no verifier mounts")
            python = self.verifier_python(task)
            laid = verifier_tree.lay_out(
                Path(box.host_dir) / "v", python, self.wheelhouse, link=True
            )
            bytecode = self._bytecode.get(self.image(task))
            if bytecode is not None:
                shutil.copytree(bytecode, laid / "pylib", dirs_exist_ok=True, copy_function=_link)
            shutil.rmtree(Path(box.host_dir) / "tests")
            shutil.copytree(stage.tests, Path(box.host_dir) / "tests")
            verifier_tree.readable(Path(box.host_dir) / "tests")
        try:
            api.start(box.id)
        except Exception as exc:
            raise SandboxError(f"cannot restart container {box.short}: {exc}") from exc
        frozen = DockerFrozen(self, task, box, key, max(0, len(listed) - len(_OWN_PROCESSES)))
        frozen.python = python
        return frozen

    def carry_out(self, paths: Sequence[str], limit: int = 256 << 20) -> tuple[bytes, int]:
        """For a separate verifier (Harbor ``environment_mode = "separate"``): every process
        of the agent's container is stopped (the engine kills it; nothing of the agent runs
        after), then ``paths`` of its files, those that exist, are read through the engine
        into one tar rooted at ``/`` (the agent's processes never touch the copy), up to
        ``limit`` bytes (past it: ``OverLimit``, the agent's doing). Returns the tar and how
        many processes were stopped."""
        import docker

        box = self._current
        if box is None:
            raise SandboxError("no container to carry files out of")
        api = self.client.api
        try:
            listed = api.top(box.id).get("Processes") or []
        except Exception as exc:
            raise SandboxError(f"cannot list the processes of {box.short}: {exc}") from exc
        self._restart(box, start=False)
        out = io.BytesIO()
        got = 0
        with tarfile.open(fileobj=out, mode="w:", format=tarfile.PAX_FORMAT) as carried:
            for path in paths:
                try:
                    stream, _ = api.get_archive(box.id, path)
                except docker.errors.NotFound:
                    continue  # as Harbor: an artifact that is not there is not carried
                except Exception as exc:
                    raise SandboxError(f"cannot read {path} of {box.short}: {exc}") from exc
                data = io.BytesIO()
                for chunk in stream:
                    got += len(chunk)
                    if got > limit:
                        raise OverLimit("bytes", got, limit, f"the artifacts ({path})")
                    data.write(chunk)
                data.seek(0)
                parent = posixpath.dirname(path.rstrip("/")).lstrip("/")
                with tarfile.open(fileobj=data, mode="r:") as one:
                    for member in one.getmembers():
                        if member.issym() or member.islnk() or member.isdev():
                            continue  # links and devices stay behind: data only
                        member.name = posixpath.join(parent, member.name)
                        fileobj = one.extractfile(member) if member.isfile() else None
                        carried.addfile(member, fileobj)
        return out.getvalue(), max(0, len(listed) - len(_OWN_PROCESSES))

    def verifier_declared(self, task: TerminalTask) -> tuple[str, dict[str, str], str]:
        """(PATH, declared variables, the agent's HOME) of the tests: the image's ENV."""
        declared = dict(self.image_config(task)["env"])
        return declared.get("PATH", DEFAULT_PATH), declared, declared.get("HOME", "/root")

    def verifier_python(self, task: TerminalTask) -> str:
        """The image's ``python3`` (first on its PATH), from a container no agent touched."""
        image = self.image(task)
        if image in self._pythons:
            return self._pythons[image]
        path = self.image_config(task)["env"].get("PATH", DEFAULT_PATH)
        box = self._start(image, task.id, "none", services=False)
        try:
            rc, out, _, _, _ = box.exec(
                [
                    "sh",
                    "-c",
                    f"PATH={shlex.quote(path)}; command -v python3 || echo /usr/bin/python3",
                ],
                user="0:0",
                timeout=60,
            )
            found = out.decode(errors="replace").strip().splitlines()
            python = (
                found[0] if rc == 0 and found and found[0].startswith("/") else "/usr/bin/python3"
            )
            self._bytecode[image] = self._compile_pylib(box, python)
        finally:
            self._discard(box)
        self._pythons[image] = python
        return python

    def _compile_pylib(self, box: Any, python: str) -> str | None:
        """The verifier's packages compiled by the image's interpreter, in a container no
        agent touched (the tree is read-only in the grading session: without bytecode its
        pytest would be compiled anew at every start). A host dir of ``__pycache__`` files,
        or None when the image cannot (no python3: the tests run without it anyway)."""
        from agentenvs.envs.terminal.images import tar_of
        from agentenvs.sandbox._leftovers import owned_mkdtemp

        lib = Path(verifier_tree.pylib(self.wheelhouse))
        where = "/tmp/agentenvs-pylib"
        try:
            self.client.api.put_archive(box.id, "/", tar_of([(lib, where)]))
            rc, _, _, _, _ = box.exec(
                [python, "-m", "compileall", "-q", where], user="0:0", timeout=120
            )
            if rc != 0:
                return None
            stream, _ = self.client.api.get_archive(box.id, where)
            data = b"".join(stream)
        except Exception:  # noqa: BLE001 - bytecode only saves time
            return None
        root = Path(owned_mkdtemp("agentenvs-pylib-"))
        top = posixpath.basename(where)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar.getmembers():
                parts = member.name.split("/")
                if not member.isfile() or "__pycache__" not in parts or ".." in parts:
                    continue
                rel = "/".join(parts[1:]) if parts[0] == top else member.name
                f = tar.extractfile(member)
                if f is None:
                    continue
                dest = root / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(f.read())
        verifier_tree.readable(root)
        return str(root)
