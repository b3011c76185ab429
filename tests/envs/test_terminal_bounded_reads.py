"""Every copy of the agent's files into the host is bounded and sparse-aware.

An agent can make files that cost its sandbox nothing and the host a lot: sparse files
(``truncate -s 256M f`` takes 4 KB), a huge number of files, a tree thousands of dirs
deep, a file that grows while it is copied. Each bomb here is what a policy does through
``gym.make`` + ``step`` on each runtime; the env runs in a fresh subprocess (one for
every bomb of a runtime and mode, each bomb in its own episode) that reports the peak of
its own resident memory (``ru_maxrss``, reset just before each bomb) before and after it. Each test
asserts from outside that ``step`` returned, that the peak grew by less than
``RSS_BOUND`` (the old copies read a sparse file's holes whole: +2 GB for 1 GB of holes),
that the refusal names the copy limit that was passed with its figure, and that an honest
episode afterwards in the same env still passes.

On the local runtime the end state is copied at the freeze before grading, so the bomb
is submitted and the verdict's finding checked; on Docker the grading reads nothing of
the work dir into the host, so the copies are snapshots (``step_rewards=True`` grades
each step on a snapshot; ``snapshot()`` says why it could not hold the files).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

import pytest

#: how much the env process's peak resident memory may grow across one bomb
RSS_BOUND_MB = 96

#: what the agent runs; sparse files cost the sandbox nothing, real data written is tiny
BOMBS = {
    # 4 x 200 MiB of holes in the work dir
    "many-sparse": "for i in 1 2 3 4; do truncate -s 200M /app/sparse$i; done",
    # one file far past every copy limit, all holes: no file-size limit stops it (as in
    # Harbor's containers; a real task's tests truncate a file to the free space + 8 GiB)
    "one-huge-sparse": "truncate -s 8G /app/huge",
    # a .pth the interpreter reads at start, made of holes (the user site is copied
    # on local, the work dir on both)
    "sparse-pth": (
        'site="$(python3 -m site --user-site)"; mkdir -p "$site" /app && '
        'truncate -s 256M "$site/zz.pth"; truncate -s 256M /app/zz.pth'
    ),
    # 110,000 empty files
    "file-count": (
        'mkdir -p /app/many && python3 -c "import os\nfor i in range(110000): '
        "os.close(os.open(f'/app/many/{i}', os.O_CREAT | os.O_WRONLY))\""
    ),
    # a tree 10,000 dirs deep
    "deep-tree": (
        "python3 -c \"import os\nos.chdir('/app')\nfor i in range(10000): "
        "os.mkdir('d'); os.chdir('d')\""
    ),
}
#: on Docker, a tree deeper than the task container's disk watch allows (256 levels) is
#: stopped by the watch first: there a tree 200 deep, past the copy limit alone
DEEP_DOCKER = BOMBS["deep-tree"].replace("range(10000)", "range(200)")
#: the limit each bomb passes
PASSES = {
    "many-sparse": "max_bytes",
    "one-huge-sparse": "max_bytes",
    "sparse-pth": "max_bytes",
    "file-count": "max_files",
    "deep-tree": "max_depth",
}
#: a background job that keeps adding 200 MiB sparse files while the copy runs (up to
#: 40 of them: 8 GB of holes, no data)
GROWING = (
    "nohup sh -c 'i=0; while [ $i -lt 40 ]; do i=$((i + 1)); "
    "truncate -s 200M /app/grow$i; done' >/dev/null 2>&1 &\n"
    "sleep 0.05"
)

#: one interpreter plays every case of a runtime and mode in turn (the peak resident
#: memory reset before each bomb, so each bomb's growth is its own), each in a fresh
#: episode, each followed by an honest episode in the same env; a case that raises is
#: reported and the next one gets a new env
_SCRIPT = r"""
import json, resource, sys, time, traceback
import gymnasium as gym
import agentenvs  # noqa: F401

runtime, mode, cases = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])


def peak_kb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def reset_peak():
    # Linux: writing 5 resets the process's peak resident memory (ru_maxrss with it)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def make():
    return gym.make("agentenvs/TerminalBench-v0", runtime=runtime, command_timeout=120,
                    step_rewards=(mode == "snapshot"))


results = {}
env = None
for name, bomb in cases:
    out = {}
    start = time.monotonic()
    try:
        env = env or make()
        env.reset(options={"task_id": "word-frequency"})
        env.step("```bash\necho warm\n```")
        if mode == "snapshot":
            env.unwrapped.snapshot()
        out["peak_reset"] = reset_peak()
        before = peak_kb()
        if mode == "submit":
            obs, reward, term, trunc, info = env.step(f"```bash\n{bomb}\n```\nsubmit")
            out["findings"] = info.get("grading_findings", [])
            out["terminated"] = term
        else:
            obs, reward, term, trunc, info = env.step(f"```bash\n{bomb}\n```")
            out["lost"] = env.unwrapped.snapshot().state.get("lost")
        out["grew_mb"] = (peak_kb() - before) / 1024
        out["reward"] = reward
        out["obs"] = obs[-600:]
        env.reset(options={"task_id": "word-frequency"})
        action = env.unwrapped.oracle_action() + "\nsubmit"
        _, _, _, _, info = env.step(action)
        out["honest"] = info["success"]
    except Exception:
        out["error"] = traceback.format_exc()[-3000:]
        if env is not None:
            env.close()
        env = None
    out["seconds"] = round(time.monotonic() - start, 1)  # for the reader of a slow run
    results[name] = out
if env is not None:
    env.close()
print("RESULT " + json.dumps(results))
"""

RUNTIMES = [
    pytest.param("local", marks=pytest.mark.bwrap),
    pytest.param("docker", marks=pytest.mark.docker("agentenvs/terminal:latest")),
]


def _need(runtime: str) -> None:
    from tests._services import require_bwrap, require_docker

    if runtime == "docker":
        require_docker("agentenvs/terminal:latest")
    else:
        require_bwrap()


#: a sparse file of 8 GiB made in the work dir, its size said back
EIGHT_GIB = "truncate -s 8G /app/big && stat -c made=%s /app/big"


def _cases(runtime: str, mode: str) -> list[tuple[str, str]]:
    """What one interpreter plays for ``runtime`` and ``mode``: every bomb (the .pth one
    last, as the interpreter of the next bombs would read it where it survived), the
    8 GiB file, and on snapshots the growing files."""
    deep = DEEP_DOCKER if runtime == "docker" else BOMBS["deep-tree"]
    cases = [
        (b, deep if b == "deep-tree" else BOMBS[b]) for b in sorted(BOMBS) if b != "sparse-pth"
    ]
    cases += [("sparse-pth", BOMBS["sparse-pth"]), ("8g", EIGHT_GIB)]
    return cases + ([("growing", GROWING)] if mode == "snapshot" else [])


def _play(runtime: str, mode: str, cases: list[tuple[str, str]]) -> dict[str, dict]:
    """``cases`` through ``step`` in one fresh process: what it reported of each."""
    _need(runtime)
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, runtime, mode, json.dumps(cases)],
        capture_output=True,
        text=True,
        timeout=840,
        env=os.environ.copy(),
        check=False,
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    assert done.returncode == 0 and lines, (done.returncode, done.stderr[-3000:])
    return json.loads(lines[-1][len("RESULT ") :])


@pytest.fixture(scope="module")
def played() -> Callable[[str, str, str], dict]:
    """``played(runtime, mode, case)``: that case's report; each runtime and mode is
    played once for the module, at its first case asked for."""
    runs: dict[tuple[str, str], dict[str, dict]] = {}

    def get(runtime: str, mode: str, case: str) -> dict:
        if (runtime, mode) not in runs:
            runs[runtime, mode] = _play(runtime, mode, _cases(runtime, mode))
        got = runs[runtime, mode][case]
        if not got.get("peak_reset", True) and case != _cases(runtime, mode)[0][0]:
            # the peak could not be reset (no /proc/self/clear_refs): alone, as the first
            # case of a fresh process, the peak before the bomb is the process's own
            got = _play(runtime, mode, [c for c in _cases(runtime, mode) if c[0] == case])[case]
        assert "error" not in got, got["error"]
        return got

    return get


def _names_limit(text: str, limit: str) -> None:
    assert f"past the copy limit {limit}" in text and "(at most " in text, text


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first case asked for plays them all
@pytest.mark.parametrize("bomb", sorted(BOMBS))
@pytest.mark.bwrap
def test_local_grading_refuses_the_bomb_unread(played: Callable, bomb: str) -> None:
    """Local: the freeze's copy of the end state is measured first; the bomb is not
    graded (a finding naming the limit), the host's memory does not grow with it."""
    got = played("local", "submit", bomb)
    assert got["terminated"] and got["reward"] == 0.0, got
    assert got["grew_mb"] < RSS_BOUND_MB, got
    assert len(got["findings"]) == 1, got
    _names_limit(got["findings"][0], PASSES[bomb])
    assert got["honest"] is True, got


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first case asked for plays them all
@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_snapshot_refuses_the_bomb_unread(played: Callable, runtime: str, bomb: str) -> None:
    """A snapshot (here the one a step reward grades) is measured first: it holds no
    files, says which limit they passed, and the host's memory does not grow."""
    got = played(runtime, "snapshot", bomb)
    assert got["reward"] == 0.0, got
    assert got["grew_mb"] < RSS_BOUND_MB, got
    assert got["lost"], got
    _names_limit(got["lost"], PASSES[bomb])
    assert got["honest"] is True, got


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first case asked for plays them all
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_sparse_8g_file_is_made_and_never_read_whole(played: Callable, runtime: str) -> None:
    """The sandbox sets no file-size limit (Harbor's containers set none): an 8 GiB sparse
    file is made, and the snapshot that a step reward grades still refuses to copy it."""
    got = played(runtime, "snapshot", "8g")
    assert "made=8589934592" in got["obs"], got
    assert got["grew_mb"] < RSS_BOUND_MB, got
    _names_limit(got["lost"], "max_bytes")
    assert got["honest"] is True, got
    if runtime == "local":  # the freeze's copy before grading refuses it too
        got = played(runtime, "submit", "8g")
        assert got["terminated"] and got["reward"] == 0.0, got
        assert len(got["findings"]) == 1, got
        _names_limit(got["findings"][0], "max_bytes")


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first case asked for plays them all
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_file_growing_during_the_copy_is_cut(played: Callable, runtime: str) -> None:
    """Files that grow while a snapshot copies them: the copy is sparse (holes are not
    read) and stops at the limit, wherever the growth stood when it was measured."""
    got = played(runtime, "snapshot", "growing")
    assert got["grew_mb"] < RSS_BOUND_MB, got
    assert got["lost"], got  # by the time of the second snapshot, 8 GB of holes
    _names_limit(got["lost"], "max_bytes")
    assert got["honest"] is True, got


def test_measure_walks_a_tree_10000_deep_without_recursion(tmp_path) -> None:  # noqa: ANN001
    """The walk behind every copy is iterative: a tree 10,000 dirs deep is refused at
    the depth limit (no ``RecursionError``), and a sparse file counts its holes."""
    from agentenvs.sandbox._files import CopyLimits, OverLimit, measure

    root = tmp_path / "tree"
    root.mkdir()
    try:
        fd = os.open(root, os.O_RDONLY)
        for _ in range(10_000):
            os.mkdir("d", dir_fd=fd)
            nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        os.close(fd)
        with pytest.raises(OverLimit) as caught:
            measure(str(root))
        assert (caught.value.limit, caught.value.figure, caught.value.cap) == ("depth", 65, 64)
        with open(root / "sparse", "wb") as f:
            f.truncate(300 << 20)
        size = measure(str(root), ["sparse"], CopyLimits(max_bytes=1 << 40))
        assert (size.files, size.bytes) == (1, 300 << 20) and size.allocated < 1 << 20
        with pytest.raises(OverLimit, match="past the copy limit max_bytes, 314572800 bytes"):
            measure(str(root), ["sparse"])
    finally:
        subprocess.run(["rm", "-rf", "--", str(root)], check=False)
    assert not root.exists()


@pytest.mark.slow
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_one_file_filling_the_disk_is_stopped_by_the_disk_bounds(runtime: str) -> None:
    """Without a file-size limit a single file of real data is stopped by what bounds the
    disk: the work dir's tmpfs on local (``ENOSPC``), the disk cap on Docker (the
    container is stopped and the episode ends)."""
    from agentenvs.envs.terminal.env import NO_FILE_SIZE_LIMIT_MB, TerminalBenchEnv
    from agentenvs.sandbox.base import Limits

    _need(runtime)
    limits = Limits(
        cpu_seconds=3600,
        memory_mb=512,
        max_processes=64,
        max_file_mb=NO_FILE_SIZE_LIMIT_MB,
        max_open_files=1024,
        disk_mb=256,
        shm_mb=32,
    )
    fixtures = os.path.join(os.path.dirname(__file__), "terminal_fixtures")
    env = TerminalBenchEnv(tasks_path=fixtures, runtime=runtime, limits=limits, command_timeout=120)
    try:
        env.reset(options={"task_id": "tb1-greeting"})
        obs, reward, term, _, info = env.step("head -c 3G /dev/zero > /app/big; echo rc=$?")
        if runtime == "docker":
            assert term and reward == 0.0, obs
            assert info["sandbox_lost"].startswith("disk cap"), info
        else:
            assert "No space left" in obs and "rc=1" in obs, obs
    finally:
        env.close()
