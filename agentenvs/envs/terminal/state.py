"""What a Terminal-Bench snapshot's state holds, checked whole before a restore touches the
sandbox: the verdict so far, the last command's status, whether the sandbox was lost, and
(when it was not) the work dir as a tar archive of that dir alone, with the shell's cwd
and exports.
"""

from __future__ import annotations

import base64
import shlex
from typing import Any

from agentenvs.core.errors import SandboxError


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
    # so are the verifier's and the agent's timeouts and the agent's time used
    timing = {"verifier_timed_out", "agent_timed_out", "agent_used_s"}
    given = set(state) - {"fraction", "problems", "exposed", "steps"} - timing
    if "steps" in state:
        check_steps(state["steps"])
    for name in ("problems", "exposed"):
        value = state.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{name} must be a list of str")
    for name in ("verifier_timed_out", "agent_timed_out"):
        if not isinstance(state.get(name, False), bool):
            raise ValueError(f"{name} must be a bool")
    used = state.get("agent_used_s", 0.0)
    if isinstance(used, bool) or not isinstance(used, int | float) or used < 0:
        raise ValueError("agent_used_s must be a number >= 0")
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


def check_steps(steps: Any) -> None:
    """Raise ``ValueError`` unless ``steps`` is a multi-step trial's place: the step's
    index, each step run's verdict (its name, rewards or None, success, score) and
    whether the trial is over."""
    if not isinstance(steps, dict) or set(steps) != {"index", "results", "over"}:
        raise ValueError("steps must be a dict of index, results and over")
    index, results = steps["index"], steps["results"]
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError("steps.index must be an int >= 0")
    if not isinstance(steps["over"], bool) or not isinstance(results, list):
        raise ValueError("steps.over must be a bool and steps.results a list")
    for r in results:
        if not isinstance(r, dict) or not isinstance(r.get("name"), str):
            raise ValueError("each step result is a dict with a str name")
        rewards = r.get("rewards")
        if rewards is not None and (
            not isinstance(rewards, dict)
            or not all(isinstance(k, str) and isinstance(v, float) for k, v in rewards.items())
        ):
            raise ValueError("a step's rewards map names to floats, or are None")
        if not isinstance(r.get("success"), bool) or not isinstance(r.get("score"), float):
            raise ValueError("a step result has a bool success and a float score")


def check_dir_archive(data: Any, top: str, limits: Any = None) -> None:
    """Raise ``ValueError`` unless ``data`` is a whole tar archive of ``top/`` alone; with
    ``limits`` (``CopyLimits``), ``OverLimit`` once its files' sizes pass ``max_bytes``
    (files that grew as sparse ones after they were measured), before their data is read."""
    import io
    import posixpath
    import tarfile

    if not isinstance(data, bytes):
        raise ValueError("files must be the bytes of a tar archive")
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            if limits is not None:
                from agentenvs.envs.terminal.copies import OverLimit

                total = sum(m.size for m in archive.getmembers() if m.isfile())
                if total > limits.max_bytes:
                    what = f"the files of {top} (grown while copied)"
                    raise OverLimit("bytes", total, limits.max_bytes, what)
            for member in archive:
                name = posixpath.normpath(member.name)
                if name != top and not name.startswith(f"{top}/"):
                    raise ValueError(f"the archive holds {member.name!r:.80}, outside {top}/")
                if member.isfile():
                    # reading the data checks that the archive is whole up to this member
                    extracted = archive.extractfile(member)
                    got = 0
                    # in pieces: a sparse member's holes are read as zeros
                    while extracted is not None and (piece := extracted.read(1 << 20)):
                        got += len(piece)
                    if extracted is not None and got != member.size:
                        raise ValueError(f"{member.name!r:.80} is cut short")
    except tarfile.TarError as exc:
        raise ValueError(f"files is not a readable tar archive: {exc}") from None


def read_work_dir(shell: Any, runtime: Any, where: str) -> bytes:
    """The tar of the work dir ``where`` a snapshot holds: through the runtime's own
    channel where it has one (local: the host's tar through the namespace's root), else a
    tar in the container through the shell's control pipe, checked whole (Docker: the
    engine's archive keeps whole seconds of mtimes). Either is measured first and bounded
    by the runtime's ``copy_limits`` (``OverLimit`` past them, nothing copied), sparse
    files copied as such."""
    from agentenvs.envs.terminal.copies import (
        DEFAULT_COPY_LIMITS,
        OverLimit,
        measure_command,
        read_measure,
    )

    limits = getattr(runtime, "copy_limits", DEFAULT_COPY_LIMITS)
    parent, name = where.rsplit("/", 1)
    reader = getattr(runtime, "read_dir", None)
    if reader is not None:
        data = reader(shell, where)
        try:
            check_dir_archive(data, name, limits)
        except ValueError as exc:
            raise SandboxError(f"cannot read {where} for a snapshot ({exc})") from exc
        return bytes(data)
    what = f"the files of {where}"
    rc, out = shell.control(measure_command(where, limits), timeout=120)
    if rc is None:
        raise SandboxError(f"cannot measure {where} for a snapshot (timed out)")
    size = read_measure(out, limits, what)
    # without find's -printf or awk here, the archive alone is cut at max_bytes
    cap = limits.archive_bytes(size) if size is not None else limits.max_bytes
    why = "status"
    for _ in range(3):
        rc, out = shell.control(
            # POSIX format: mtimes to the nanosecond (GNU format keeps whole seconds)
            "tar -c --sparse --format=posix --pax-option=delete=atime,delete=ctime "
            f"--sort=name --numeric-owner -C {shlex.quote(parent or '/')} "
            f"{shlex.quote(name)} 2>/dev/null | head -c {cap + 1} | base64 -w0",
            timeout=120,
        )
        if rc != 0:
            why = f"status {rc}"
            continue
        # the pipeline's status is base64's: a tar that could not start (no process slot
        # left: a fork bomb) or the shell's own messages come back as a bad archive
        try:
            data = base64.b64decode(out.strip(), validate=True)
            if len(data) > cap:
                raise OverLimit("bytes", len(data), cap, f"{what} (grown while copied)")
            check_dir_archive(data, name, limits)
        except ValueError as exc:  # binascii.Error is one
            why = str(exc)[:120]
            continue
        return data
    raise SandboxError(f"cannot read {where} for a snapshot ({why})")


def work_dir_files(shell: Any, where: str) -> str:
    """The hash of the work dir ``where``'s files that its state key holds (git indexes by
    their staged entries: the index caches stat data that differ between equal states); a
    work dir past the copy limits (``copies``) is hashed by its entries' metadata in walk
    order instead (depth, name, type, size, mtime, mode): reading its holes or a tree
    thousands of dirs deep whole would take minutes. Raises ``SandboxError`` when the
    sandbox died."""
    from agentenvs.envs.terminal.copies import DEFAULT_COPY_LIMITS, measure_command

    parent, name = where.rsplit("/", 1)
    top = shlex.quote(name)
    rc, out = shell.control(
        f"{measure_command(where, DEFAULT_COPY_LIMITS)} >/dev/null; "
        "if [ $? -eq 3 ]; then "
        f"find {shlex.quote(where)} -printf '%d %f %y %s %T@ %m\\n' 2>/dev/null; else "
        # anchored patterns: one match per member, where an unanchored one is tried
        # at every '/' of the path (a tree 1,200 dirs deep took minutes)
        "{ tar -c --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner "
        f"--anchored --exclude={top}/.git/index --exclude={top}/'*/.git/index' "
        f"-C {shlex.quote(parent or '/')} {top} 2>/dev/null; "
        f"find {shlex.quote(where)} -name .git -prune 2>/dev/null | sort | "
        'while read -r g; do echo "$g"; '
        'git -C "${g%/.git}" ls-files --stage 2>/dev/null; done; }; fi | md5sum'
    )
    return out.decode(errors="replace").strip()


def work_dir_key(shell: Any, where: str, tested: bool, files: str | None = None) -> str:
    """The state key of a work dir: the hash of its files (``work_dir_files``; ``files``
    when it is known already: a fresh session's, hashed while it waited as a spare), the
    shell's directory, and whether the tests ran; ``lost`` when the sandbox died."""
    if files is None:
        try:
            files = work_dir_files(shell, where)
        except SandboxError:  # the sandbox died; the next step ends the episode
            return "lost"
    return f"{files}\x00{shell.cwd}\x00{tested}"
