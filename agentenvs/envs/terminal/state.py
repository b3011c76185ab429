"""What a Terminal-Bench snapshot's state holds, checked whole before a restore touches the
sandbox: the verdict so far, the last command's status, whether the sandbox was lost, and
(when it was not) the work dir as a tar archive of that dir alone, with the shell's cwd
and exports.
"""

from __future__ import annotations

from typing import Any


def check_state(state: Any) -> None:
    """Raise ``ValueError`` unless ``state`` is a whole Terminal-Bench state."""
    fields = {
        "tested",
        "results",
        "harbor_reward",
        "rewards",
        "unmet",
        "test_output",
        "last_exit",
        "last_timed_out",
        "lost",
        "findings",
        "stopped",
    }
    if not isinstance(state, dict) or not fields <= set(state):
        raise ValueError(f"a TerminalBench state is a dict with at least {sorted(fields)}")
    lost = state["lost"]
    files = {"files", "cwd", "exports", "dir"}
    # "fraction" (the last step reward's baseline) is optional: older snapshots lack it
    given = set(state) - {"fraction", "problems", "exposed"}
    for name in ("problems", "exposed"):
        value = state.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{name} must be a list of str")
    fraction = state.get("fraction", 0.0)
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        raise ValueError("fraction must be a number")
    if lost is None and given != fields | files:
        raise ValueError(f"a TerminalBench state with its sandbox has {sorted(fields | files)}")
    if lost is not None and (not isinstance(lost, str) or given != fields):
        raise ValueError("a TerminalBench state of a lost sandbox has a str 'lost' and no files")
    names = ("test_output",) + (("cwd", "exports", "dir") if lost is None else ())
    for name in names:
        if not isinstance(state[name], str):
            raise ValueError(f"{name} must be a str")
    for name in ("tested", "last_timed_out"):
        if not isinstance(state[name], bool):
            raise ValueError(f"{name} must be a bool")
    results, rewards, unmet = state["results"], state["rewards"], state["unmet"]
    if not isinstance(results, dict) or not all(
        isinstance(k, str) and isinstance(v, bool) for k, v in results.items()
    ):
        raise ValueError("results must map test names to bools")
    if not isinstance(rewards, dict) or not all(
        isinstance(k, str) and isinstance(v, float) for k, v in rewards.items()
    ):
        raise ValueError("rewards must map names to floats")
    if not isinstance(unmet, list) or not all(isinstance(u, str) for u in unmet):
        raise ValueError("unmet must be a list of str")
    findings = state["findings"]
    if not isinstance(findings, list) or not all(isinstance(f, str) for f in findings):
        raise ValueError("findings must be a list of str")
    stopped = state["stopped"]
    if isinstance(stopped, bool) or not isinstance(stopped, int) or stopped < 0:
        raise ValueError("stopped must be a non-negative int")
    reward = state["harbor_reward"]
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)):
        raise ValueError("harbor_reward must be None or a number")
    last = state["last_exit"]
    if last is not None and (isinstance(last, bool) or not isinstance(last, int)):
        raise ValueError("last_exit must be None or an int")
    if lost is None:
        where = state["dir"]
        if not where.startswith("/") or where.rstrip("/") == "":
            raise ValueError(f"dir must be an absolute path below /, got {where!r:.80}")
        check_dir_archive(state["files"], where.rstrip("/").rsplit("/", 1)[1])


def check_dir_archive(data: Any, top: str) -> None:
    """Raise ``ValueError`` unless ``data`` is a whole tar archive of ``top/`` alone."""
    import io
    import posixpath
    import tarfile

    if not isinstance(data, bytes):
        raise ValueError("files must be the bytes of a tar archive")
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            for member in archive:
                name = posixpath.normpath(member.name)
                if name != top and not name.startswith(f"{top}/"):
                    raise ValueError(f"the archive holds {member.name!r:.80}, outside {top}/")
                if member.isfile():
                    # reading the data checks that the archive is whole up to this member
                    extracted = archive.extractfile(member)
                    if extracted is not None and len(extracted.read()) != member.size:
                        raise ValueError(f"{member.name!r:.80} is cut short")
    except tarfile.TarError as exc:
        raise ValueError(f"files is not a readable tar archive: {exc}") from None
