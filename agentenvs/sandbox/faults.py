"""Who caused a sandbox failure: the program run in it, or the infrastructure.

When what a sandbox runs ends in a way the program's result does not explain (a case
worker that stopped answering, a process whose output ended early, an exec that
failed), the backend asks the rules below before it reports anything. A failure that is
the program's stays an outcome (``CaseRun.error``, a ``RunResult``, a process's EOF), as
before; one that is not raises :class:`~agentenvs.core.errors.Fault` out of
``run_python_cases``, ``run``, ``spawn`` and the spawned process's :meth:`fault`, never a
verdict. The rules are ``agentenvs.core.errors``'s: a verdict rests on what the host or
the engine saw, never on anything the sandboxed program can write; a failure the
program can produce with the same evidence is the program's; missing evidence is
``unknown``, never a guess of "the program's".

Local (bubblewrap), from bwrap's exit status as the host's ``wait`` saw it and what bwrap
wrote on its ``--json-status-fd`` (a pipe no process inside holds):

- bwrap killed by a signal: ``sandbox``. bwrap runs outside the sandbox's pid namespace,
  where nothing inside can see or signal it.
- no ``exit-code`` line: the sandbox never ran its pid 1's program (bwrap failed to set
  up its namespaces or mounts, a bind source was gone, the runtime missing, the exec of
  pid 1 failed): ``sandbox``. Nothing of the program runs before that.
- pid 1 ended with a status above 128, i.e. was killed by a signal: ``sandbox``. Pid 1 is
  our own (the case worker, or a shell that runs the command as its child); the kernel
  drops every signal sent to a namespace's init from inside it that the init has no
  handler for, SIGKILL and SIGSTOP included, so only the host (or the host's OOM killer)
  can kill it. Every test case runs with ``oom_score_adj`` 1000, so memory that runs out
  takes the program's processes before the worker. The case worker never exits above 128 by itself; the shell exits with its
  command's status, which it reports first on a pipe of its own: a status above 128 that
  the shell reported is the command's (killed by a signal), not pid 1's.
- pid 1 stopped (``T`` in ``/proc``) while the host waited for it: ``sandbox`` (a SIGSTOP
  from the host; from inside, it is dropped as above).
- anything else is the program's: its timeout, memory, process or output limit, its
  crash, its exit, a case that kills the worker's children or itself (``kill -9 -1``,
  ``os.kill(os.getpid(), 9)``), a worker gone silent. A process of the program killed from
  the host (not pid 1) looks exactly like the program killing itself, so it is the
  program's too.

Docker, from the engine's answers once something failed (nothing in a container reaches
them: the sandbox's code runs as unprivileged uids that cannot signal the container's
root init, stop, pause or remove the container):

1. the engine does not answer a ping: ``engine``;
2. the container is gone and this process did not remove it: ``container``
   (``docker rm -f``); its state cannot be read: ``engine``;
3. paused, stopped, dead or restarted (its start time is not the one it was created
   with) and not ``OOMKilled``: ``container`` (``docker kill``/``stop``/``pause``/
   ``restart``, a daemon restart, the host killing its init). ``OOMKilled`` is the
   program's: its processes ran the container out of the memory the sandbox gave it;
4. running as it was: an engine request that failed (an exec the engine refused or cut
   short, a connection it dropped) is ``engine``, unless the container's processes fill
   its pids limit (the program's fork bomb makes execs fail that way); anything else is
   the program's (a case that killed the worker: the worker and the cases share a uid).

Every Fault here is ``retryable``: the next sandbox, or the next container, may work.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from agentenvs.core.errors import UNKNOWN, Fault, SandboxError

#: how long a verdict waits for bwrap to exit once its pid 1's output ended
LOCAL_EXIT_WAIT_S = 10.0
#: requests made to read the evidence give up after this long (an engine that hangs)
PROBE_TIMEOUT_S = 20.0
#: how long a container that looks running, yet cannot run a probe, is asked again
STATE_WAIT_S = 10.0


# ----------------------------------------------------------------------------- local
def bwrap_status(text: str) -> dict[str, Any]:
    """The JSON objects bwrap wrote on its ``--json-status-fd``, merged (one a line)."""
    merged: dict[str, Any] = {}
    for line in text.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            merged.update(obj)
    return merged


def local_fault(
    returncode: int | None,
    status: str | None,
    *,
    what: str,
    reported: frozenset[int] | None = None,
    stderr: str = "",
) -> Fault | None:
    """The Fault that a local sandbox's end is, per the module's rules; None: the program's.

    ``returncode``: bwrap's exit status from ``wait`` (negative: killed by that signal;
    None: still running, which is never a fault here); ``status``: what bwrap wrote on its
    json status fd (None: a bwrap without one, whose exit status is then read as its pid
    1's, and a sandbox that could not start is not told apart); ``what``: what was running, for the message; ``reported``: the
    statuses pid 1 reported for its command (None when pid 1 is the case worker, which
    runs no command and never exits above 128 by itself); ``stderr``: bwrap's messages.
    """
    if returncode is None:
        return None
    if returncode < 0:
        return Fault(
            f"the local sandbox running {what} was killed from outside",
            kind="sandbox",
            evidence=f"bwrap was killed by signal {-returncode}; it runs outside the "
            "sandbox's pid namespace, where nothing inside can signal it",
        )
    fields = bwrap_status(status) if status is not None else {"exit-code": returncode}
    if "exit-code" not in fields:
        why = (stderr.strip().splitlines() or [f"bwrap exit status {returncode}"])[-1][:300]
        return Fault(
            f"the local sandbox for {what} could not start: {why}",
            kind="sandbox",
            evidence=f"bwrap exited with {returncode} and never reported its pid 1's exit "
            f"(json status: {(status or '').strip()[:200] or 'empty'})",
        )
    code = int(fields["exit-code"])
    if code > 128 and (reported is None or code not in reported):
        return Fault(
            f"the local sandbox running {what} was killed from outside",
            kind="sandbox",
            evidence=f"the sandbox's pid 1 was killed by signal {code - 128}, which nothing "
            "inside its pid namespace can send it",
        )
    return None


def local_stopped(host_pid: int, what: str) -> Fault | None:
    """A Fault when the host process ``host_pid`` (a sandbox's pid 1) is stopped."""
    try:
        with open(f"/proc/{host_pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
    if state not in ("T", "t"):
        return None
    return Fault(
        f"the local sandbox running {what} was stopped from outside",
        kind="sandbox",
        evidence=f"its pid 1 is in state {state!r} (stopped); nothing inside its pid "
        "namespace can stop it",
    )


# ----------------------------------------------------------------------------- docker
def engine_call_failed(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what it was raised from) is an engine request that failed: an
    API or connection error, or an exec the engine refused, cut short or would not start."""
    seen: set[int] = set()
    current = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__module__.split(".", 1)[0] in ("docker", "requests", "urllib3"):
            return True
        if isinstance(current, SandboxError) and str(current).startswith(
            ("engine refused the exec", "engine closed the exec connection", "cannot start a")
        ):
            return True
        if isinstance(current, (ConnectionError, TimeoutError)):
            return True
        current = current.__cause__ or current.__context__
    return False


def _first_line(exc: BaseException | None) -> str:
    if exc is None:
        return ""
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def _get(api: Any, path: str, *args: str) -> Any:
    """A GET of the engine's API with this module's own timeout."""
    return api._result(api._get(api._url(path, *args), timeout=PROBE_TIMEOUT_S), json=True)


def container_fault(
    api: Any,
    container_id: str,
    *,
    what: str,
    started_at: str | None = None,
    pids_limit: int | None = None,
    exc: BaseException | None = None,
    probe: Callable[[], BaseException | None] | None = None,
) -> Fault | None:
    """The Fault that a failure in a container is, per the module's Docker rules; None:
    the program's.

    ``api``: the SDK's low-level client; ``started_at``: the container's ``StartedAt`` when
    it was created (None: not checked); ``pids_limit``: its pids limit (None: not
    checked); ``exc``: the exception the failure raised, if any; ``probe``: runs a trivial
    process in the container, returning what failed (None: it ran). A container that
    looks running but cannot run the probe is asked again for a while: the engine
    reports a kill or a removal a moment after the container's processes died of it.
    """
    short = container_id[:12]
    cause = f" ({_first_line(exc)})" if exc is not None else ""
    try:
        api._result(api._get(api._url("/_ping"), timeout=PROBE_TIMEOUT_S))
    except Exception as ping_error:  # noqa: BLE001 - every failure means no answer
        return Fault(
            f"the Docker engine does not answer after {what} failed{cause}",
            kind="engine",
            evidence=f"ping: {type(ping_error).__name__}: {_first_line(ping_error)}",
        )
    probed: BaseException | None = None
    end = time.monotonic() + STATE_WAIT_S
    while True:
        try:
            info = _get(api, "/containers/{0}/json", container_id)
        except Exception as inspect_error:  # noqa: BLE001
            if getattr(getattr(inspect_error, "response", None), "status_code", None) == 404:
                return Fault(
                    f"container {short} was removed from outside while {what} ran{cause}",
                    kind="container",
                    evidence="inspect: no such container; this process did not remove it, "
                    "and the sandbox's uids cannot",
                )
            return Fault(
                f"the Docker engine cannot say what became of container {short}{cause}",
                kind="engine",
                evidence=f"inspect failed: {type(inspect_error).__name__}: "
                f"{_first_line(inspect_error)}",
            )
        state = dict(info.get("State") or {})
        text = ", ".join(
            f"{k}={state.get(k)!r}"
            for k in ("Status", "ExitCode", "OOMKilled", "Error", "StartedAt")
            if state.get(k) not in (None, "")
        )
        if state.get("Paused") or not state.get("Running") or state.get("Restarting"):
            if state.get("OOMKilled") and not state.get("Paused"):
                return None  # the program's processes ran it out of the memory it was given
            return Fault(
                f"container {short} was stopped, killed or paused from outside while "
                f"{what} ran{cause}",
                kind="container",
                evidence=f"state: {text}; its init is root, which the sandbox's uids cannot signal",
            )
        if started_at is not None and state.get("StartedAt") != started_at:
            return Fault(
                f"container {short} was restarted from outside while {what} ran{cause}",
                kind="container",
                evidence=f"state: {text}; it was started at {started_at}",
            )
        if probe is None or exc is not None:
            break
        probed = probe()
        if probed is None:
            return None  # alive and well: what ended was the program's doing
        if time.monotonic() > end:
            exc = probed
            cause = f" ({_first_line(exc)})"
            break
        time.sleep(0.1)
    if not engine_call_failed(exc):
        return None
    if pids_limit is not None:
        try:
            n = len(_get(api, "/containers/{0}/top", container_id).get("Processes") or [])
        except Exception as top_error:  # noqa: BLE001
            return Fault(
                f"the Docker engine failed a request on container {short}{cause}",
                kind="engine",
                attribution=UNKNOWN,
                evidence=f"state: {text}; its processes cannot be listed "
                f"({_first_line(top_error)}), so a full pids limit is not ruled out",
            )
        if n >= pids_limit - 2:
            return None  # the program's processes fill the pids limit: execs fail so
        text += f"; {n} of {pids_limit} pids in use"
    return Fault(
        f"the Docker engine failed a request on running container {short}{cause}",
        kind="engine",
        evidence=f"state: {text}; nothing of the sandbox stopped it",
    )


def no_container(exc: BaseException, image: str) -> Fault:
    """The Fault that a sandbox that had a container gets when a new one cannot be made:
    ``engine`` when no engine answers, else ``container`` (the image gone, a create or
    start the engine refused)."""
    from agentenvs.sandbox._docker_engine import docker_available

    ok, why = docker_available(image)
    engine_down = not ok and why.startswith("no Docker engine answers")
    return Fault(
        f"the sandbox cannot get a new container: {_first_line(exc)}",
        kind="engine" if engine_down else "container",
        evidence=why,
    )
