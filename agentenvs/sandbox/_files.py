"""Host-side access to a sandbox's work dir that untrusted files cannot turn against the host.

Programs in the sandbox can plant symlinks, FIFOs or odd permissions in their work dir;
the host (often root) then reads and writes it. So every path is resolved component by
component from a directory fd with ``O_NOFOLLOW`` (no symlink is ever followed, even if
one is swapped in mid-walk), only regular files are read, and writes go through a temp
file renamed into place (which replaces rather than follows whatever sits there).

Every copy of such a tree is bounded before a byte is read: ``measure`` walks it
(iteratively, one directory fd per level, so no depth raises ``RecursionError``) and
raises ``OverLimit`` past ``CopyLimits``; sizes count as the files' *apparent* sizes, so a
sparse file's holes count in full and nothing the host reads can expand past the cap.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import stat
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from agentenvs.core.errors import SandboxError
from agentenvs.sandbox.base import WORKDIR

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class CopyLimits:
    """How much of a sandbox's files any copy into the host (its memory or its disk) may
    take: the apparent bytes of its regular files in total (holes count), its entries of
    any kind, and how many directories deep they lie. Past any, the copy is refused
    before it starts (``OverLimit``)."""

    max_bytes: int = 256 << 20
    max_files: int = 100_000
    max_depth: int = 64

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_files", "max_depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"CopyLimits.{name} must be a positive int, got {value!r}")

    def archive_bytes(self, measured: TreeSize) -> int:
        """The most a tar of a tree ``measure`` found may hold: its bytes, each entry's
        headers (pax's included) and padding, and the archive's end blocks. A tar that
        gives more read files that grew after the walk."""
        return measured.bytes + (measured.files + 8) * 3 * 512 + (20 << 10)


#: the limits every copy takes unless told otherwise
DEFAULT_COPY_LIMITS = CopyLimits()


class OverLimit(SandboxError):
    """A copy of the sandbox's files refused: they are past ``limit`` (``"bytes"``,
    ``"files"`` or ``"depth"``) of ``CopyLimits``. The agent's doing: its files."""

    def __init__(self, limit: str, figure: int, cap: int, where: str = "the files") -> None:
        self.limit, self.figure, self.cap, self.where = limit, figure, cap, where
        what = {
            "bytes": "bytes (apparent size, holes of sparse files included)",
            "files": "files and directories",
            "depth": "directories deep",
        }[limit]
        super().__init__(
            f"{where}: past the copy limit max_{limit}, {figure} {what} "
            f"(at most {cap}); nothing was copied"
        )


@dataclass
class TreeSize:
    """What ``measure`` found: apparent bytes of the regular files, the bytes they take
    on disk (allocated blocks), entries of any kind, and the deepest level."""

    bytes: int = 0
    allocated: int = 0
    files: int = 0
    depth: int = 0


def measure(
    root: str,
    names: Iterable[str] | None = None,
    limits: CopyLimits = DEFAULT_COPY_LIMITS,
    where: str = "the files",
) -> TreeSize:
    """Walk the tree under ``root`` (only its entries ``names`` when given; absent ones
    are skipped), no link followed, and raise ``OverLimit`` as soon as it is past
    ``limits``. Iterative: it holds one directory fd per level, and stops past
    ``max_depth``, so neither depth nor breadth can exhaust the host."""
    size = TreeSize()
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    stack: list[tuple[int, Iterator[str], int]] = []
    try:
        stack.append((top, iter(names) if names is not None else _entries(top), 1))
        while stack:
            fd, it, depth = stack[-1]
            name = next(it, None)
            if name is None:
                stack.pop()
                os.close(fd)
                continue
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:  # gone meanwhile, or not there (a named entry)
                continue
            size.files += 1
            size.allocated += st.st_blocks * 512
            if size.files > limits.max_files:
                raise OverLimit("files", size.files, limits.max_files, where)
            size.depth = max(size.depth, depth)
            if depth > limits.max_depth:
                raise OverLimit("depth", depth, limits.max_depth, where)
            if stat.S_ISREG(st.st_mode):
                size.bytes += st.st_size
                if size.bytes > limits.max_bytes:
                    raise OverLimit("bytes", size.bytes, limits.max_bytes, where)
            elif stat.S_ISDIR(st.st_mode):
                try:
                    sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:  # swapped for a link or removed meanwhile
                    continue
                try:
                    stack.append((sub, _entries(sub), depth + 1))
                except BaseException:
                    os.close(sub)
                    raise
    finally:
        for fd, _, _ in stack:
            os.close(fd)
    return size


def _entries(fd: int) -> Iterator[str]:
    """The names in directory ``fd``, read lazily (a huge directory is not listed whole)."""
    with os.scandir(fd) as it:
        for entry in it:
            yield entry.name


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


_MARK = "__AE_MEASURED__"


def measure_command(where: str, limits: CopyLimits) -> str:
    """A shell command measuring the tree ``where`` inside the sandbox as ``measure``
    does (apparent bytes of regular files, entries, depth with ``where`` at 1), stopping
    at the first limit passed (its status then 3); ``read_measure`` reads its answer."""
    return (
        f"find {shlex.quote(where)} -printf '%y %s %d\\n' 2>/dev/null | "
        f"awk -v mb={limits.max_bytes} -v mf={limits.max_files} -v md={limits.max_depth} "
        '\'{ n++; if ($1 == "f") b += $2; if ($3 + 1 > d) d = $3 + 1; '
        "if (n > mf || b > mb || d > md) { over = 1; exit } } "
        f'END {{ printf "{_MARK} %d %.0f %d\\n", n, b, d; if (over) exit 3 }}\''
    )


def read_measure(output: bytes, limits: CopyLimits, where: str) -> TreeSize | None:
    """What ``measure_command`` said (None: this sandbox could not measure: no GNU
    ``find`` or no ``awk``); ``OverLimit`` past ``limits``."""
    for line in reversed(output.decode(errors="replace").splitlines()):
        words = line.split()
        if len(words) == 4 and words[0] == _MARK:
            try:
                files, size, depth = (int(w) for w in words[1:])
            except ValueError:
                return None
            if files == 0:
                return None  # find said nothing: it cannot -printf, or where is gone
            if files > limits.max_files:
                raise OverLimit("files", files, limits.max_files, where)
            if size > limits.max_bytes:
                raise OverLimit("bytes", size, limits.max_bytes, where)
            if depth > limits.max_depth:
                raise OverLimit("depth", depth, limits.max_depth, where)
            return TreeSize(bytes=size, files=files, depth=depth)
    return None


def snapshot(root: str, limits: CopyLimits = DEFAULT_COPY_LIMITS) -> dict[str, tuple[int, bytes]]:
    """Every regular file under ``root``: relative path -> (permission bits, bytes).

    The tree is measured first (``OverLimit`` past ``limits``); each file is then read up
    to what is left of ``max_bytes`` (a file that grew meanwhile raises ``OverLimit``)."""
    measure(root, limits=limits, where="the work dir's files")
    files: dict[str, tuple[int, bytes]] = {}
    left = limits.max_bytes
    for rel, fd in _walk_files(root, limits):
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                continue
            data = f.read(left + 1)
            if len(data) > left:
                raise OverLimit(
                    "bytes", limits.max_bytes + 1, limits.max_bytes, "the work dir's files"
                )
            left -= len(data)
            files[rel] = (st.st_mode & 0o777, data)
    return files


def _walk_files(root: str, limits: CopyLimits) -> Iterator[tuple[str, int]]:
    """(relative path, an open fd) of each non-directory under ``root``, iteratively, no
    link followed (the caller closes each fd); at most ``max_depth`` levels."""
    stack: list[tuple[int, Iterator[str], str, int]] = []
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        stack.append((top, _entries(top), "", 1))
        while stack:
            dfd, it, rel, depth = stack[-1]
            name = next(it, None)
            if name is None:
                stack.pop()
                os.close(dfd)
                continue
            path = f"{rel}{name}"
            try:
                sub = os.open(name, _DIR_FLAGS, dir_fd=dfd)
            except OSError:
                pass
            else:
                if depth > limits.max_depth:
                    os.close(sub)
                    raise OverLimit("depth", depth, limits.max_depth, "the work dir's files")
                stack.append((sub, _entries(sub), path + "/", depth + 1))
                continue
            try:
                fd = os.open(
                    name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd
                )
            except OSError:  # a symlink (ELOOP) or gone: not a file of the snapshot
                continue
            yield path, fd
    finally:
        for dfd, _, _, _ in stack:
            os.close(dfd)


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
    """The disk space the files under ``root`` take (allocated blocks, links not followed;
    an unbounded walk, iterative as ``measure`` is)."""
    big = CopyLimits(max_bytes=1 << 62, max_files=1 << 62, max_depth=1 << 30)
    try:
        return measure(root, limits=big).allocated
    except OSError:
        return 0
