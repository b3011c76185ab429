"""Who caused a failure of a Terminal-Bench sandbox: the agent or the infrastructure.

When the agent's shell, an exec, or a step of the grading fails, the runtime that holds
the sandbox decides from evidence whether the failure is the agent's (an outcome: the
episode goes on to the wrecked-sandbox path and is scored) or not (a
:class:`~agentenvs.core.errors.Fault` raised out of ``reset``, ``step`` or
``score_action``: never scored, retried or reported by whoever runs the episode). The
rules are ``agentenvs.core.errors``'s: a verdict rests on what the engine or the host saw,
never on anything inside the sandbox; a failure the agent's own commands can produce with
the same evidence is the agent's (a policy that could turn its failures into faults would
learn to); and missing evidence is ``unknown``, never a guess of "agent".

Docker (:func:`docker_verdict`), asked in this order once something failed:

1. **The engine answers** a ping; else ``engine``.
2. **The engine's event stream was unbroken** over the container's life. Each runtime
   holds one stream of its own containers' events open from its start
   (:class:`EngineWatch`); nothing inside a container reaches that connection, so a break
   is the engine's (a daemon restart, which also kills or orphans the containers, or a
   dropped connection): ``engine``.
3. **The container's state and events**, as the engine reports them:

   - gone, with a ``destroy`` event this env did not cause (``docker rm -f``): ``container``;
     gone with no event that says how: ``container``, attribution ``unknown``;
   - paused, or a ``kill``, ``stop``, ``restart`` or ``pause`` event beyond the kills this
     env made itself (safe grading's freeze): ``container`` (``docker kill``/``stop``, a
     host's tooling). Only the API logs a ``kill``: a process inside that signals the
     container's init logs none;
   - stopped with a ``die`` event and none of those: the agent's. Root in the container can
     end it from inside (``kill -TERM 1``: Docker's init forwards it to the main
     process), and an ``OOMKilled`` container hit the memory limit the agent was given;
   - stopped with no ``die`` event seen: ``container``, ``unknown``.
4. **Running, nothing from outside**, and still so after the verdict has watched it for
   :data:`SETTLE_S` (a killed container's processes can end, and its exec return, before
   the engine logs the ``kill`` and marks it stopped): an engine call that failed (an API error, an exec
   the engine refused, a connection it closed on a request) is ``engine``, unless the
   container's writable layer holds :data:`AGENT_DISK_MB` or more (the agent can fill the
   host's disk through it, and the engine's calls then fail for lack of space: the
   agent's); anything else
   is the agent's: its shell supervisor killed from inside, ``rm -rf /``, a fork bomb at
   the pids limit, an exec that started and found no shell in the files it left.

A container no agent ever used (a reset's, a restore's) that fails with a verdict of "the
agent's" failed for what its image holds: the task's, refused as a broken task.

Local (:func:`local_verdict`): the sandbox is bubblewrap with a pid namespace whose pid 1
is the sandbox's own shell. No process inside can signal bwrap (it is outside the
namespace) or pid 1 (the kernel drops in-namespace signals to a namespace's init that has
no handler, SIGKILL always), and pid 1 never exits above 128 of itself (a child killed by a
signal is reported as 128). So, with bwrap's exit status as the host's ``wait`` saw it:

- bwrap killed by a signal, or exited with 129 and up (its pid 1 killed by a signal):
  ``sandbox``, infrastructure (SIGKILLed from the host, the OOM killer of the host);
- bwrap that exited by itself with 128 or less: the agent's (its shell supervisor killed
  from inside, its limits);
- a sandbox that cannot start (a bwrap error, no user namespaces): ``sandbox``,
  infrastructure; nothing of the agent's runs before its shell does.

The sandbox's writable dirs are private tmpfs mounts of its namespace, and the host dir of
the local sandbox is not bound for the shell's sessions: only the agent (and the grader)
can fill them, so a full one is the agent's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from agentenvs.core.errors import INFRASTRUCTURE, UNKNOWN, Fault, SandboxError

#: what a sandbox failure raises: the runtime's own errors, and failed engine requests and
#: connections (the Docker SDK's errors are OSErrors); each is judged by the rules here
SANDBOX_FAILURES = (SandboxError, OSError)
#: the engine's actions on a container that only its API (or the engine itself) takes
OUTSIDE_ACTIONS = ("stop", "restart", "pause", "destroy")
#: the container events a verdict reads (exec events are left out: there are many)
KEPT_ACTIONS = frozenset(
    {"create", "start", "kill", "die", "stop", "restart", "pause", "unpause", "destroy", "oom"}
)
#: how long a verdict waits for the engine to report a stopped container's ``die`` (or a
#: removed one's ``destroy``) on the event stream: the events follow the state at once
EVENT_WAIT_S = 15.0
#: how long a verdict watches a container that still reads as running, with nothing from
#: outside, before it takes it as running: a killed container's processes can end before
#: the engine logs the kill and marks it stopped (a few ms; seconds on a loaded machine)
SETTLE_S = 5.0
SETTLE_POLL_S = 0.1
#: requests of the watch's own client (pings, inspections) give up after this long
PROBE_TIMEOUT_S = 30.0
#: a container's writable layer holding this much is the agent's filling of the host's
#: disk (overlay2 has no per-container quota without xfs): an engine call that fails on
#: it then is the agent's doing, not the engine's
AGENT_DISK_MB = 4096


class EngineWatch:
    """The engine's events for one runtime's containers, as they happen, and the times
    the event stream was broken.

    ``label`` (``key=value``) selects the containers. The stream is opened in the
    constructor (which raises when the engine does not answer) and reopened after a
    break until :meth:`close`.
    """

    def __init__(self, label: str) -> None:
        from agentenvs.sandbox.docker import _docker_module

        docker = _docker_module()
        self.client = docker.from_env(timeout=PROBE_TIMEOUT_S)
        self._label = label
        self._events: dict[str, list[tuple[str, dict[str, str]]]] = {}
        #: [start, end] of each break (wall-clock seconds; end None while it lasts)
        self._breaks: list[list[float | None]] = []
        self._cond = threading.Condition()
        self._closed = False
        self._stream = self._connect()
        self._thread = threading.Thread(target=self._run, daemon=True, name="agentenvs-tb-events")
        self._thread.start()

    def _connect(self) -> Any:
        return self.client.api.events(
            filters={"type": "container", "label": self._label}, decode=True
        )

    def _run(self) -> None:
        stream = self._stream
        while True:
            try:
                for event in stream:
                    self._note(event)
            except Exception:  # noqa: BLE001 - any end of the stream is a break
                pass
            with self._cond:
                if self._closed:
                    return
                self._breaks.append([time.time(), None])
                self._cond.notify_all()
            while True:
                try:
                    stream = self._connect()
                except Exception:  # noqa: BLE001 - the engine is still away
                    with self._cond:
                        if self._cond.wait_for(lambda: self._closed, timeout=0.5):
                            return
                    continue
                with self._cond:
                    if self._closed:
                        _close_stream(stream)
                        return
                    self._stream = stream
                    self._breaks[-1][1] = time.time()
                break

    def _note(self, event: dict[str, Any]) -> None:
        action = str(event.get("Action") or event.get("status") or "")
        action = action.split(":", 1)[0]
        if action not in KEPT_ACTIONS:
            return
        actor = event.get("Actor") or {}
        cid = str(actor.get("ID") or event.get("id") or "")
        attrs = {str(k): str(v) for k, v in (actor.get("Attributes") or {}).items()}
        with self._cond:
            self._events.setdefault(cid, []).append((action, attrs))
            self._cond.notify_all()

    def events(self, cid: str) -> list[tuple[str, dict[str, str]]]:
        """(action, attributes) of each kept event of container ``cid`` so far, in order."""
        with self._cond:
            return list(self._events.get(cid, ()))

    def wait_for(self, cid: str, actions: tuple[str, ...], timeout: float = EVENT_WAIT_S) -> bool:
        """Wait until one of ``actions`` was reported for ``cid`` (or the stream broke)."""

        def seen() -> bool:
            return any(a in actions for a, _ in self._events.get(cid, ()))

        with self._cond:
            return self._cond.wait_for(seen, timeout=timeout)

    def wait_until(
        self,
        cid: str,
        done: Callable[[list[tuple[str, dict[str, str]]]], bool],
        timeout: float,
    ) -> bool:
        """Wait until ``done`` holds for ``cid``'s events so far (or ``timeout`` passes)."""
        with self._cond:
            return self._cond.wait_for(lambda: done(self._events.get(cid, [])), timeout=timeout)

    def broken_since(self, since: float) -> str | None:
        """When the stream broke at or after ``since`` (wall clock), said; None: unbroken."""
        with self._cond:
            for start, end in self._breaks:
                assert start is not None
                if end is None or end >= since:
                    when = time.strftime("%H:%M:%S", time.localtime(start))
                    back = "" if end is None else f", back {end - start:.1f} s later"
                    return f"the engine's event stream broke at {when}{back}"
        return None

    def forget(self, cid: str) -> None:
        with self._cond:
            self._events.pop(cid, None)

    def ping(self) -> str | None:
        """None when the engine answers, else why not."""
        try:
            self.client.api.ping()
        except Exception as exc:  # noqa: BLE001 - every failure means no answer
            return f"{type(exc).__name__}: {exc}"
        return None

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            stream = self._stream
            self._cond.notify_all()
        _close_stream(stream)
        self._thread.join(timeout=10)
        try:
            self.client.close()
        except Exception:  # noqa: BLE001 - closing a dead connection
            pass


def _close_stream(stream: Any) -> None:
    try:
        stream.close()
    except Exception:  # noqa: BLE001 - the connection may already be gone
        pass


def engine_call_failed(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it was raised from) is an engine request that failed: an
    API error, a connection error, or an exec the engine refused or cut short at once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        name = type(current).__module__.split(".", 1)[0]
        if name in ("docker", "requests", "urllib3"):
            return True
        if isinstance(current, SandboxError) and str(current).startswith(
            ("engine refused the exec", "engine closed the exec connection")
        ):
            return True
        # a broken pipe is the far end closing: an exec's process that ended (a fork bomb
        # took the shell's supervisor); an engine that went is seen by the ping and its
        # event stream, not by this
        if isinstance(current, ConnectionError | TimeoutError) and not isinstance(
            current, BrokenPipeError
        ):
            return True
        current = current.__cause__ or current.__context__
    return False


def docker_verdict(
    watch: EngineWatch,
    container: str | None,
    exc: BaseException,
    *,
    own_kills: int = 0,
    since: float = 0.0,
) -> Fault | None:
    """The Fault that ``exc`` is, per the module's Docker rules; None: the agent's.

    ``container``: the id of the container the failure happened in (None: none was
    made); ``own_kills``: how many ``kill`` events this env caused on it; ``since``:
    when it was created (wall clock).
    """
    short = (container or "")[:12]
    why = watch.ping()
    if why is not None:
        return Fault(
            f"the Docker engine does not answer after a sandbox failure ({_first(exc)})",
            kind="engine",
            evidence=f"ping: {why}",
        )
    broken = watch.broken_since(since)
    if broken is not None:
        return Fault(
            f"the Docker engine's connection was lost during the episode ({_first(exc)})",
            kind="engine",
            evidence=f"{broken}: the engine restarted or dropped its connections",
        )
    if container is None:
        if engine_call_failed(exc):
            return Fault(
                f"the Docker engine failed a request: {_first(exc)}",
                kind="engine",
                evidence="no container was made; the engine answers a ping",
            )
        return None
    state, missing = _state(watch, container)
    if state is not None and _running(state) and not _outside(watch.events(container), own_kills):
        state, missing = _settled(watch, container, own_kills)
    if missing is not None:
        if state is None and missing == "gone":
            if watch.wait_for(container, ("destroy",)):
                return Fault(
                    f"container {short} was removed from outside the env ({_first(exc)})",
                    kind="container",
                    evidence="the engine reported a destroy event this env did not cause",
                )
            return Fault(
                f"container {short} is gone and the engine does not say how ({_first(exc)})",
                kind="container",
                attribution=UNKNOWN,
                evidence="inspect: no such container; no destroy event",
            )
        return Fault(
            f"the Docker engine cannot say what became of container {short}: {missing}",
            kind="engine",
            evidence=f"inspect failed: {missing}",
        )
    assert state is not None
    running = _running(state)
    if not running and not state.get("Paused"):
        watch.wait_for(container, ("die", "destroy"))
    events = watch.events(container)
    kills = sum(1 for action, _ in events if action == "kill")
    outside = [a for a, _ in events if a in OUTSIDE_ACTIONS]
    if kills > own_kills:
        signals = sorted({attrs.get("signal", "?") for a, attrs in events if a == "kill"})
        outside.append(f"kill (signal {', '.join(signals)})")
    if state.get("Paused"):
        outside.append("paused")
    if outside:
        return Fault(
            f"container {short} was stopped or killed from outside the env ({_first(exc)})",
            kind="container",
            evidence=f"engine events: {', '.join(dict.fromkeys(outside))}; "
            f"state: {_state_text(state)}",
        )
    if running:
        if engine_call_failed(exc):
            held = _writable_mb(watch, container)
            if held is not None and held >= AGENT_DISK_MB:
                return None  # the agent filled the host's disk through its container
            return Fault(
                f"the Docker engine failed a request on running container {short}: {_first(exc)}",
                kind="engine",
                evidence=f"state: {_state_text(state)}; no action from outside",
            )
        return None
    if any(action == "die" for action, _ in events):
        return None  # ended from inside (its init signaled, its memory limit)
    return Fault(
        f"container {short} stopped and the engine does not say how ({_first(exc)})",
        kind="container",
        attribution=UNKNOWN,
        evidence=f"state: {_state_text(state)}; no die event on the engine's stream",
    )


def _writable_mb(watch: EngineWatch, container: str) -> float | None:
    """MB the container's writable layer holds, as the engine measures it (None: unknown)."""
    try:
        listed = watch.client.api.containers(all=True, size=True, filters={"id": container})
    except Exception:  # noqa: BLE001 - no measure: the rule does not apply
        return None
    size = listed[0].get("SizeRw") if listed else None
    return None if size is None else float(size) / (1 << 20)


def _state(watch: EngineWatch, container: str) -> tuple[dict[str, Any] | None, str | None]:
    """(the container's State, None), or (None, "gone"), or (None, why it cannot be read)."""
    from agentenvs.sandbox.docker import _docker_module

    docker = _docker_module()
    try:
        info = watch.client.api.inspect_container(container)
    except docker.errors.NotFound:
        return None, "gone"
    except Exception as exc:  # noqa: BLE001 - the engine failed the request
        return None, f"{type(exc).__name__}: {exc}"
    return dict(info.get("State") or {}), None


def _running(state: dict[str, Any]) -> bool:
    return bool(state.get("Running")) and not state.get("Paused")


def _outside(events: list[tuple[str, dict[str, str]]], own_kills: int) -> bool:
    """Whether ``events`` hold an action from outside the env (see the module's rules)."""
    kills = sum(1 for action, _ in events if action == "kill")
    return kills > own_kills or any(action in OUTSIDE_ACTIONS for action, _ in events)


def _settled(
    watch: EngineWatch, container: str, own_kills: int
) -> tuple[dict[str, Any] | None, str | None]:
    """The container's state once it has settled, as :func:`_state` gives it.

    A process of a killed container can end (and the exec that ran it return) before the
    engine logs the ``kill`` and before it marks the container stopped. So a container
    that still reads as running, with nothing from outside, is watched for up to
    :data:`SETTLE_S`: it is settled once it stops, goes, or an action from outside shows.
    """
    deadline = time.monotonic() + SETTLE_S
    while True:
        watch.wait_until(
            container,
            lambda events: _outside(events, own_kills),
            timeout=min(SETTLE_POLL_S, max(0.0, deadline - time.monotonic())),
        )
        state, missing = _state(watch, container)
        if state is None or not _running(state) or _outside(watch.events(container), own_kills):
            return state, missing
        if time.monotonic() >= deadline:
            return state, missing


def _state_text(state: dict[str, Any]) -> str:
    keys = ("Status", "ExitCode", "OOMKilled", "Error")
    return ", ".join(f"{k}={state.get(k)!r}" for k in keys if state.get(k) not in (None, ""))


def _first(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def local_verdict(
    returncode: Callable[[], int | None], exc: BaseException, *, started: bool = True
) -> Fault | None:
    """The Fault that ``exc`` is, per the module's local rules; None: the agent's.

    ``returncode()`` is bwrap's exit status as the host's ``wait`` saw it (None: still
    running, asked again for a while); ``started``: whether the sandbox's shell had
    started (a sandbox that never did failed before anything of the agent's ran).
    """
    rc = returncode()
    end = time.monotonic() + 10
    while rc is None and time.monotonic() < end:
        time.sleep(0.05)
        rc = returncode()
    if rc is not None and (rc < 0 or rc > 128):
        sig = -rc if rc < 0 else rc - 128
        who = "bwrap" if rc < 0 else "the sandbox's pid 1"
        return Fault(
            f"the local sandbox was killed from outside ({_first(exc)})",
            kind="sandbox",
            evidence=f"{who} was killed by signal {sig}, which nothing inside can send",
        )
    if not started:
        return Fault(
            f"the local sandbox could not start: {_first(exc)}",
            kind="sandbox",
            attribution=INFRASTRUCTURE,
            evidence=f"bwrap exit status {rc}, before the sandbox's shell ran",
        )
    return None
