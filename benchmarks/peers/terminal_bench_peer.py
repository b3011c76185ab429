"""Terminal-Bench's own environment start, driven from inside its peer image.

Runs under Python 3.13 in ``agentenvs/peer-terminal-bench`` (see
``build_peer_image.sh``), started by ``bench_terminal.py`` with the engine's
socket mounted. Each line ``trial NAME`` on stdin runs one trial the way the official
harness opens one: ``Terminal(...).start()`` (``docker compose up -d`` of the task's
client container, through ``DockerComposeManager``), ``create_session("agent")`` (the
tmux session the agent types into), then the first command through that session
(``send_keys([command, "Enter"], block=True)`` and ``capture_pane()``), and finally
``Terminal.stop()`` (``docker compose down``). It answers one JSON line of timings (s),
the CPU time of this process and its children from the start to the first command's
screen (``cpu``), and the captured screen. ``quit`` ends it.

Usage: terminal_bench_peer.py COMPOSE_FILE IMAGE LOGS_DIR COMMAND
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

from terminal_bench.terminal.terminal import Terminal


def cpu() -> float:
    """CPU time of this process and its finished children (the docker CLI it runs)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def trial(name: str, compose: Path, image: str, logs: Path, command: str) -> dict:
    sessions, agent = logs / name / "sessions", logs / name / "agent-logs"
    sessions.mkdir(parents=True)
    agent.mkdir(parents=True)
    c0, t0 = cpu(), time.perf_counter()
    terminal = Terminal(
        client_container_name=name,
        client_image_name=image,
        docker_compose_path=compose,
        sessions_logs_path=sessions,
        agent_logs_path=agent,
        no_rebuild=True,  # the image exists: the harness's --no-rebuild, its fastest start
        disable_recording=True,  # the task image has no asciinema
    )
    try:
        terminal.start()
        t1 = time.perf_counter()
        session = terminal.create_session("agent", as_configured_user=True)
        t2 = time.perf_counter()
        session.send_keys([command, "Enter"], block=True, max_timeout_sec=60)
        screen = session.capture_pane()
        t3, c3 = time.perf_counter(), cpu()
    finally:
        s0 = time.perf_counter()
        terminal.stop()
        s1 = time.perf_counter()
    return {
        "start": t1 - t0,
        "session": t2 - t1,
        "first": t3 - t2,
        "total": t3 - t0,
        "cpu": c3 - c0,
        "stop": s1 - s0,
        "screen": screen,
    }


def main() -> None:
    compose, image, logs, command = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), sys.argv[4]
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        try:
            out = trial(words[1], compose, image, logs, command)
        except Exception as exc:  # noqa: BLE001 - reported to the caller, which stops
            out = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
