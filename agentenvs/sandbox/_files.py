"""Host-side access to a sandbox's work dir that untrusted files cannot turn against the host.

Programs in the sandbox can plant symlinks, FIFOs or odd permissions in their work dir;
the host (often root) then reads and writes it. So every path is resolved component by
component from a directory fd with ``O_NOFOLLOW`` (no symlink is ever followed, even if
one is swapped in mid-walk), only regular files are read, and writes go through a temp
file renamed into place (which replaces rather than follows whatever sits there).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator

from agentenvs.core.errors import SandboxError
from agentenvs.sandbox.base import WORKDIR

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def split_path(path: str) -> list[str]:
    """Components of ``path`` relative to the work dir (``/work/a/b`` or ``a/b``).

    Raises SandboxError for paths that leave it (``..``, other absolute paths) or are empty.
    """
    if path.startswith(WORKDIR + "/"):
        path = path[len(WORKDIR) + 1 :]
    elif os.path.isabs(path):
        raise SandboxError(f"path {path!r} is outside the work dir {WORKDIR}")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts or "\0" in path:
        raise SandboxError(f"path {path!r} does not name a file inside the work dir")
    return parts


@contextlib.contextmanager
def _open_dir(root: str, parts: list[str], *, create: bool) -> Iterator[int]:
    fd = os.open(root, _DIR_FLAGS)
    try:
        for name in parts:
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(name, 0o755, dir_fd=fd)
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except (NotADirectoryError, OSError) as exc:
                raise SandboxError(f"{name!r} in the path is not a plain directory: {exc}") from exc
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def read_file(root: str, path: str) -> bytes:
    """The bytes of regular file ``path`` under ``root``; symlinks and specials refused."""
    *dirs, name = split_path(path)
    with _open_dir(root, dirs, create=False) as dfd:
        try:
            fd = os.open(
                name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd
            )
        except OSError as exc:
            if isinstance(exc, FileNotFoundError):
                raise
            raise SandboxError(f"cannot read {path!r}: {exc}") from exc
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise SandboxError(f"{path!r} is not a regular file")
            return f.read()


def write_file(
    root: str, path: str, data: bytes, mode: int = 0o644, owner: tuple[int, int] | None = None
) -> None:
    """Write ``path`` under ``root`` atomically, creating directories; chown to ``owner``."""
    *dirs, name = split_path(path)
    with _open_dir(root, dirs, create=True) as dfd:
        if owner is not None:
            os.chown(dfd, *owner)
        tmp = f".{name}.agentenvs-{os.getpid()}-{id(data)}.tmp"
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=dfd,
        )
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                os.fchmod(f.fileno(), mode & 0o777)
                if owner is not None:
                    os.fchown(f.fileno(), *owner)
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
    if owner is not None and dirs:
        # directories made on the way belong to the sandbox too
        for i in range(1, len(dirs) + 1):
            with _open_dir(root, dirs[:i], create=False) as dfd:
                os.fchown(dfd, *owner)


def snapshot(root: str) -> dict[str, tuple[int, bytes]]:
    """Every regular file under ``root``: relative path -> (permission bits, bytes)."""
    files: dict[str, tuple[int, bytes]] = {}
    for dirpath, _dirs, names, dfd in os.fwalk(root, follow_symlinks=False):
        rel = os.path.relpath(dirpath, root)
        for name in names:
            try:
                fd = os.open(
                    name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd
                )
            except OSError:  # a symlink (ELOOP) or gone: not a file of the snapshot
                continue
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode):
                    continue
                key = name if rel == "." else f"{rel}/{name}"
                files[key] = (st.st_mode & 0o777, f.read())
    return files


def clear_dir(root: str) -> None:
    """Remove everything inside ``root`` (not ``root`` itself), whatever its permissions."""

    def fix_and_retry(func, path, _exc):  # type: ignore[no-untyped-def]
        # a directory the program made unwritable (matters when the host is not root)
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), 0o700)
            if func in (os.rmdir, os.unlink):
                func(path)

    with os.scandir(root) as it:
        entries = list(it)
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, onerror=fix_and_retry)
            else:
                os.unlink(entry.path)
        except (OSError, RecursionError):
            pass
    with os.scandir(root) as it:
        left = [e.path for e in it]
    if left:  # very deep trees or stubborn permissions: let rm finish the job
        subprocess.run(["chmod", "-R", "u+rwx", "--", *left], check=False, capture_output=True)
        subprocess.run(["rm", "-rf", "--one-file-system", "--", *left], check=False)
        if any(os.path.lexists(p) for p in left):
            raise SandboxError(f"could not empty the work dir {root}")


def tree_bytes(root: str) -> int:
    """The disk space the files under ``root`` take (allocated blocks, links not followed)."""
    total = 0
    for _dirpath, dirs, names, dfd in os.fwalk(root, follow_symlinks=False):
        for name in (*dirs, *names):
            with contextlib.suppress(OSError):
                total += os.stat(name, dir_fd=dfd, follow_symlinks=False).st_blocks * 512
    return total
