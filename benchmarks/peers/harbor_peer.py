"""Harbor's own Docker environment start, driven from inside its peer image.

Runs under Python 3.13 in ``agentenvs/peer-harbor`` (see ``build_peer_image.sh``),
started by ``bench_terminal.py`` with the engine's socket mounted. Each line
``trial NAME`` on stdin runs one trial's environment the way Harbor's ``Trial`` opens
it: the task folder loaded by ``harbor.models.task.task.Task``, a
``DockerEnvironment`` with its default trial mounts (``/logs/agent``, ``/logs/verifier``,
``/logs/artifacts``),
``start(force_build=False)`` (the task's ``docker_image``, so no build: its compose
files, ``docker compose down`` of stale containers, ``up --detach --wait``, the log
dirs made), then the first command with ``exec`` (``docker compose exec``), and
finally ``stop(delete=False)`` (``docker compose down``). It answers one JSON line of
timings (s), the CPU time of this process and its children from the start to the
command's output (``cpu``), and the command's output. ``quit`` ends it.

Usage: harbor_peer.py TASK_DIR LOGS_DIR COMMAND
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import sys
import time
from pathlib import Path

from harbor.environments.docker.docker import DockerEnvironment
from harbor.models.task.task import Task
from harbor.models.trial.paths import TrialPaths


def cpu() -> float:
    """CPU time of this process and its finished children (the docker CLI it runs)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


async def trial(name: str, task: Task, logs: Path, command: str) -> dict:
    paths = TrialPaths(trial_dir=logs / name)
    paths.mkdir()
    c0, t0 = cpu(), time.perf_counter()
    env = DockerEnvironment(
        environment_dir=task.paths.environment_dir,
        environment_name=task.short_name,
        session_id=f"{name}__env",
        trial_paths=paths,
        task_env_config=task.config.environment,
        logger=logging.getLogger("harbor-peer"),
    )
    try:
        await env.start(force_build=False)
        t1 = time.perf_counter()
        result = await env.exec(command, timeout_sec=60)
        t2, c2 = time.perf_counter(), cpu()
    finally:
        s0 = time.perf_counter()
        await env.stop(delete=False)
        s1 = time.perf_counter()
    return {
        "start": t1 - t0,
        "first": t2 - t1,
        "total": t2 - t0,
        "cpu": c2 - c0,
        "stop": s1 - s0,
        "screen": f"{result.stdout or ''}{result.stderr or ''}",
        "rc": result.return_code,
    }


def main() -> None:
    task, logs, command = Task(Path(sys.argv[1])), Path(sys.argv[2]), sys.argv[3]
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        try:
            out = asyncio.run(trial(words[1], task, logs, command))
        except Exception as exc:  # noqa: BLE001 - reported to the caller, which stops
            out = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
