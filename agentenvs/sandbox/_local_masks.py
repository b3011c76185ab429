"""What of the host a ``local`` sandbox does not see, though the system dirs it shows hold it.

The sandbox shows ``/usr``, ``/etc`` and the merged-usr dirs read-only. Inside them may lie
this host's Python installs (their site/dist-packages: other distributions' data, such as
BFCL's answers or InterCode's gold queries), what those point at (editable checkouts, data
files), this package, its checkout, the bundled tasks, the data cache, and the task files an
env hands to ``hide_from_sandboxes``. Each is masked: a dir under an empty read-only tmpfs,
a file under ``/dev/null``; a dir programs need (those on ``PATH``, the libraries') is never
covered whole.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import threading
from collections.abc import Iterator

from agentenvs.sandbox._local_bwrap import _PATH

#: the system dirs a sandbox shows (read-only): whatever lies inside them is visible
_SHOWN = ("/usr/", "/etc/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/lib32/", "/libx32/")
#: where Python distributions get installed inside those dirs (system, /usr/local, conda)
_SITE_GLOBS = tuple(
    f"{root}/{python}*/{kind}-packages"
    for root in ("/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/local/lib", "/usr/local/lib64",
                 "/usr/local/*/lib", "/usr/*/lib")
    for python in ("python", "pypy")
    for kind in ("site", "dist")
)  # fmt: skip
_hidden_lock = threading.Lock()
_hidden_extra: set[str] = set()


def hide_from_sandboxes(*paths: str | os.PathLike[str]) -> None:
    """Keep ``paths`` (files or dirs, e.g. the task files an env loaded) out of the view of
    every local sandbox started from now on in this process, where a system dir it shows
    would hold them."""
    with _hidden_lock:
        _hidden_extra.update(os.path.realpath(p) for p in paths)


def _shown(path: str) -> bool:
    """Whether ``path`` (resolved) lies inside a system dir the sandbox shows, at least two
    levels down (``/usr/local`` itself is never masked)."""
    return path.startswith(_SHOWN) and path.count("/") >= 3


@functools.lru_cache(maxsize=1)
def _essential() -> tuple[str, ...]:
    """Dirs a mask must never cover (programs need them): those on ``PATH``, the libraries'
    and ``share``; a task file found in one is masked alone."""
    import sysconfig

    dirs = [*_PATH.split(":"), "/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/libexec"]
    dirs += ["/usr/share", "/usr/include", "/usr/local/lib", "/usr/local/share", "/etc/ssl"]
    multiarch = sysconfig.get_config_var("MULTIARCH")
    if multiarch:
        dirs.append(f"/usr/lib/{multiarch}")
    return tuple(os.path.realpath(d) for d in dirs)


def _maskable(path: str) -> bool:
    if not _shown(path):
        return False
    if not os.path.isdir(path):
        return True
    return not any((d + "/").startswith(path + "/") for d in _essential())


def _pointers(site: str) -> Iterator[str]:
    """What an install dir points at outside itself: ``.pth`` and ``.egg-link`` paths
    (editable checkouts), editable finders' mappings, and the data files of a RECORD that
    lie outside the dir (``../../../share/...``; scripts in ``bin`` excepted)."""
    try:
        names = os.listdir(site)
    except OSError:
        return
    for name in names:
        path = os.path.join(site, name)
        try:
            if name.endswith((".pth", ".egg-link")):
                with open(path, encoding="utf-8", errors="replace") as f:
                    for line in f.read(1 << 20).splitlines():
                        line = line.strip()
                        if line and not line.startswith(("#", "import ", "import\t")):
                            yield os.path.join(site, line)
            elif name.startswith("__editable__") and name.endswith(".py"):
                with open(path, encoding="utf-8", errors="replace") as f:
                    yield from re.findall(r"""['"](/[^'"\n]+)['"]""", f.read(1 << 20))
            elif name.endswith(".dist-info"):
                with open(os.path.join(path, "RECORD"), encoding="utf-8", errors="replace") as f:
                    for row in f.read(1 << 22).splitlines():
                        rel = row.rsplit(",", 2)[0]
                        if not rel.startswith(".."):
                            continue
                        full = os.path.normpath(os.path.join(site, rel))
                        if not os.path.isfile(full):
                            continue
                        prefix = os.path.normpath(os.path.join(site, "..", "..", ".."))
                        inner = os.path.relpath(full, prefix).split(os.sep)
                        if inner[0] == "bin":
                            continue
                        # a data dir of its own (share/<name>/...), else the file itself
                        shared = inner[0] == "share" and len(inner) > 2
                        yield os.path.join(prefix, *inner[:2]) if shared else full
        except OSError:
            continue


@functools.lru_cache(maxsize=1)
def _installed_paths() -> tuple[str, ...]:
    """Everything of this host's Python installs that the shown system dirs hold: every
    site/dist-packages dir (other distributions' data: BFCL's answers, InterCode's gold
    queries, ...), what their pointers name, this package and its checkout, the bundled
    tasks and the data cache, the user's site. Found once per process."""
    import glob
    import site
    import sysconfig

    import agentenvs

    found: list[str] = []
    for pattern in _SITE_GLOBS:
        found += glob.glob(pattern)
    with contextlib.suppress(Exception):
        found += site.getsitepackages()
    with contextlib.suppress(Exception):
        found.append(site.getusersitepackages())
    paths = sysconfig.get_paths()
    found += [paths.get("purelib", ""), paths.get("platlib", "")]
    found += [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")]
    here = os.path.realpath(os.path.dirname(agentenvs.__file__))
    found.append(here)
    checkout = os.path.dirname(here)
    if any(os.path.exists(os.path.join(checkout, n)) for n in ("pyproject.toml", ".git")):
        found.append(checkout)
    with contextlib.suppress(Exception):
        from agentenvs.core.tasks import tasks_root

        found.append(str(tasks_root()))
    with contextlib.suppress(Exception):
        from agentenvs.data.cache import cache_root

        found.append(str(cache_root()))
    sites = [os.path.realpath(p) for p in found if p and os.path.isdir(p)]
    for site_dir in list(sites):
        if _shown(site_dir):
            found += list(_pointers(site_dir))
    return tuple(os.path.realpath(p) for p in found if p)


def _hidden_paths() -> list[str]:
    """The paths masked in every sandbox: of :func:`_installed_paths` and the paths given to
    :func:`hide_from_sandboxes`, those the shown system dirs hold, outermost only (a mask
    inside another would need a mount point in a read-only tmpfs)."""
    with _hidden_lock:
        extra = tuple(_hidden_extra)
    candidates = sorted({p for p in (*_installed_paths(), *extra) if _maskable(p)})
    kept: list[str] = []
    for path in candidates:
        if kept and (path + "/").startswith(kept[-1] + "/"):
            continue
        if os.path.lexists(path):
            kept.append(path)
    return kept
