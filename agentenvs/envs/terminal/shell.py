"""A persistent bash session inside a sandbox, driven over the pipes of one process.

The spawned process is a small POSIX-sh *supervisor* that reads one-line requests:

- ``S <base64>``: text for the agent's bash (which reads its script from a FIFO);
- ``X <base64>``: run a control command beside the shell (``sh -c``, stdin from
  /dev/null), then print ``__AE_X_<nonce>_<status>``;
- ``U <bytes> <base64>``: the next ``<bytes>`` raw bytes of the stream are the stdin of
  a control command (file uploads);
- ``R <pid>``: kill the agent's bash and start a new one.

Control commands run in the same pid namespace / container as the agent's shell, so
the tests can see the processes the agent left running, and a timed-out command can be
interrupted from beside it. The agent's bash runs with job control (``set -m``): every
foreground command and background job has its own process group, so on timeout the
command's groups get SIGINT then SIGKILL, while jobs started by earlier commands keep
running. Each agent command is ``eval``'d in the shell itself (``cd``, variables and
jobs persist), with stdin from /dev/null, followed by a sentinel that carries its exit
status and the shell's working directory.
"""

from __future__ import annotations

import base64
import re
import secrets
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass

from agentenvs.core.errors import SandboxError
from agentenvs.sandbox.base import SandboxProcess

SUPERVISOR = r"""
n=$1; fifo=/tmp/.ae-shell-$n; trap '' PIPE
start() {
  rm -f "$fifo"; mkfifo -m 600 "$fifo" || exit 97
  # a background job of sh starts with SIGINT ignored: give bash (and its jobs) the default
  { env --default-signal=INT,QUIT bash --noprofile --norc -s <"$fifo" 2>&1; printf '\n__AE_EXIT_%s_%d\n' "$n" "$?"; } &
  exec 3>"$fifo"; rm -f "$fifo"
}
start
while IFS= read -r line; do
  arg=${line#? }
  case $line in
    S\ *) printf %s "$arg" | base64 -d >&3 ||
          { [ -x "$(command -v base64)" ] || printf '\n__AE_BROKEN_%s\n' "$n"; } ;;
    X\ *) cmd=$(printf %s "$arg" | base64 -d) || cmd='exit 127'  # a wrecked system fails
          sh -c "$cmd" </dev/null 2>&1
          printf '\n__AE_X_%s_%d\n' "$n" "$?" ;;
    U\ *) size=${arg%% *}; cmd=${arg#* }
          head -c "$size" | sh -c "$(printf %s "$cmd" | base64 -d)" 2>&1
          printf '\n__AE_X_%s_%d\n' "$n" "$?" ;;
    R\ *) exec 3>&-; kill -KILL "$arg" 2>/dev/null; wait; start ;;
  esac
done
"""

_LINE_REF = re.compile(r"(bash: (?:eval: )?line )(\d+):")
#: how long the shell may take to begin a command (its start is not charged to the command)
START_GRACE_S = 30.0
#: a timed-out command's process groups get SIGINT, then SIGKILL if alive this long after
INTERRUPT_GRACE_S = 1.0
#: with none of the command's processes left, how long the shell may take to report before
#: it counts as stuck in a builtin that waits (``wait`` for an earlier job)
REPORT_GRACE_S = 10.0
#: ... or how much CPU time it may spend meanwhile (a builtin loop: ``while :; do :; done``)
BUILTIN_CPU_S = 0.5
#: rounds in which the shell started new processes after its others were signaled: a loop
#: that goes on starting commands (``while :; do sleep 1; done``)
RESPAWN_ROUNDS = 3


def _b64(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode()


@dataclass(frozen=True)
class CommandResult:
    """What one agent command did in the shell."""

    output: str
    exit_status: int | None  # None: interrupted without an exit status
    timed_out: bool = False
    #: the shell itself died (``exit``, a kill) and a new one was started
    shell_restarted: bool = False
    duration_s: float = 0.0


class ShellSession:
    """The agent's bash and a control channel beside it, over one ``SandboxProcess``.

    ``spawn`` starts the supervisor (argv given) and returns its process; ``init`` is
    shell text run first in every new bash (environment, ``cd``).
    """

    def __init__(
        self,
        spawn: Callable[[list[str]], SandboxProcess],
        *,
        init: str = "",
        max_output_bytes: int = 1 << 20,
        workdir: str = "/app",
    ) -> None:
        self.nonce = secrets.token_hex(6)
        self._init = init
        self.max_output_bytes = max_output_bytes
        self._buf = bytearray()
        self.workdir = workdir
        self.cwd = workdir
        self.proc = spawn(["sh", "-c", SUPERVISOR, "sh", self.nonce])
        # a marker's leading newline may come in a write of its own (bash's printf flushes
        # at each newline) and another writer's text may land between the two
        self._done = re.compile(rb"\n?__AE_DONE_" + self.nonce.encode() + rb"_(\d+)_([^\n]*)\n")
        self._exit = re.compile(rb"\n?__AE_EXIT_" + self.nonce.encode() + rb"_(\d+)\n")
        self._xdone = re.compile(rb"\n?__AE_X_" + self.nonce.encode() + rb"_(\d+)\n")
        self._broken = b"\n__AE_BROKEN_" + self.nonce.encode() + b"\n"
        self.bash_pid = 0
        self._eval_line = 0
        #: commands sent so far (run, control, restart): a state read while it is
        #: unchanged was read of the same shell with nothing run in it since
        self.commands = 0
        self._start_bash()

    # ------------------------------------------------------------------ plumbing
    def _send(self, line: str) -> None:
        self.proc.write(line.encode() + b"\n")

    def _read_until(self, pattern: re.Pattern[bytes], deadline: float) -> re.Match[bytes] | None:
        """Read until ``pattern`` (or the shell's exit marker) shows up; None at the deadline."""
        while True:
            data = bytes(self._buf)  # matches must not see later edits of the buffer
            found = pattern.search(data) or self._exit.search(data)
            if found is not None:
                return found
            if self._broken in data:
                # the system under the shell is wrecked (`rm -rf /`): no command reaches it
                raise SandboxError("the sandbox can no longer decode commands (base64 is gone)")
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if self.proc.eof:
                raise SandboxError("the sandbox's shell supervisor has exited")
            chunk = self.proc.read(min(left, 1.0))
            if chunk:
                self._buf += chunk
                if len(self._buf) > 4 * self.max_output_bytes:
                    # keep the head and a tail long enough to hold the marker
                    keep = self.max_output_bytes
                    self._buf[keep : len(self._buf) - keep] = b"\n[...]\n"

    def _take(self, match: re.Match[bytes]) -> bytes:
        out = bytes(self._buf[: match.start()])
        del self._buf[: match.end()]
        return out

    def _start_bash(self) -> None:
        script = (
            # job control: a process group per command; a caught SIGINT (default again in
            # children) keeps an interrupted command from ending the shell
            "set -m 2>/dev/null; trap : INT\n"
            f"{self._init}\n"
            f"cd -- {shlex.quote(self.cwd)} 2>/dev/null || cd -- {shlex.quote(self.workdir)}\n"
            f"printf '\\n__AE_DONE_{self.nonce}_%d_%s\\n' $$ \"$PWD\"\n"
        )
        self._send("S " + _b64(script))
        end = time.monotonic() + 30
        found = self._read_until(self._done, end)
        while found is not None and found.re is self._exit:  # the old shell's end
            self._take(found)
            found = self._read_until(self._done, end)
        if found is None:
            raise SandboxError("the shell did not start")
        self._take(found)
        self.bash_pid = int(found.group(1))

    def restart(self) -> None:
        """A new bash in the last known directory (variables and jobs of the old one are lost)."""
        # the supervisor kills it and waits for its exit marker before starting another
        self.commands += 1
        self._send(f"R {self.bash_pid}")
        self._start_bash()

    # ------------------------------------------------------------------ agent commands
    def run(self, command: str, timeout: float) -> CommandResult:
        """Run ``command`` in the agent's shell; interrupt it ``timeout`` seconds after it
        began. What happens once it has timed out depends on what its processes do, not
        on how fast the machine is: on a loaded one it only takes longer.

        A sandbox that holds its resources to caps (a process with ``check_limits``, see
        ``task_container``) is asked after the command, and when the command failed: one
        past a cap raises that (a ``SandboxError``) instead."""
        check = getattr(self.proc, "check_limits", None)
        self.commands += 1
        try:
            result = self._run(command, timeout)
        except Exception:
            if check is not None:
                check()
            raise
        if check is not None:
            check()
        return result

    def _run(self, command: str, timeout: float) -> CommandResult:
        start = time.monotonic()
        script = (
            f"printf '__AE_JOBS_{self.nonce}_%s_%d\\n' \"$(jobs -p | tr '\\n' ,)\" $LINENO\n"
            f'eval "$(printf %s {_b64(command)} | base64 -d)" </dev/null\n'
            f'printf \'\\n__AE_DONE_{self.nonce}_%d_%s\\n\' "$?" "$PWD"\n'
        )
        self._send("S " + _b64(script))
        jobs_re = re.compile(rb"__AE_JOBS_" + self.nonce.encode() + rb"_([0-9,]*)_(\d+)\n")
        keep = ""
        early = b""  # output of background jobs since the last command
        # the shell prints the jobs line as the command begins: the timeout counts from there
        found = self._read_until(jobs_re, start + max(timeout, START_GRACE_S))
        if found is not None and found.re is jobs_re:
            keep = found.group(1).decode()
            self._eval_line = int(found.group(2)) + 1
            early = self._take(found)
        elif found is not None:  # the shell died before the command began
            return self._restarted(self._take(found), found, start)
        began = time.monotonic()
        found = self._read_until(self._done, began + timeout) if found is not None else None
        timed_out = found is None
        if timed_out:
            found, printed = self._interrupt(keep)
            out = early + printed
        else:
            out = early + self._take(found)
        if found is None:
            # the shell itself is stuck (a builtin loop): replace it
            self.restart()
            return CommandResult(self._decode(out), None, True, True, time.monotonic() - start)
        if found.re is self._exit:
            return self._restarted(out, found, start, timed_out)
        self.cwd = found.group(2).decode(errors="replace") or self.cwd
        status = int(found.group(1))
        return CommandResult(self._decode(out), status, timed_out, False, time.monotonic() - start)

    def _restarted(
        self, out: bytes, found: re.Match[bytes], start: float, timed_out: bool = False
    ) -> CommandResult:
        status = int(found.group(1))
        self._send(f"R {self.bash_pid}")
        self._start_bash()
        return CommandResult(self._decode(out), status, timed_out, True, time.monotonic() - start)

    def _decode(self, out: bytes) -> str:
        if out.startswith(b"\n"):
            out = out[1:]
        text = out.decode("utf-8", errors="replace")
        # bash numbers lines from the shell's start: renumber them within the command, so
        # a message does not depend on how long the shell has run (restored shells differ)
        base = self._eval_line

        def renumber(m: re.Match[str]) -> str:
            n = int(m.group(2))
            return f"{m.group(1)}{n - base + 1 if n >= base else n}:"

        return _LINE_REF.sub(renumber, text) if base else text

    def _interrupt(self, keep: str) -> tuple[re.Match[bytes] | None, bytes]:
        """Stop a timed-out command: each of its process groups gets SIGINT, then SIGKILL
        if still alive ``INTERRUPT_GRACE_S`` later. Returns the shell's end marker (taken
        from the buffer; None when the shell itself is stuck and must be replaced) and what
        the command printed up to it.

        The shell counts as stuck from what it does, not from how long it takes: none of
        the command's processes are left and it spends ``BUILTIN_CPU_S`` of CPU time
        without reporting (a builtin loop) or reports nothing for ``REPORT_GRACE_S`` (a
        builtin that waits), or it goes on starting new processes for ``RESPAWN_ROUNDS``
        rounds."""
        report = re.compile(rb"__AE_I_" + self.nonce.encode() + rb"_(cpu|group) ([^\n]*)\n")
        printed = b""
        signaled: dict[bytes, float] = {}  # process group -> when it got SIGINT
        respawns = 0
        idle_cpu: float | None = None  # the shell's CPU seconds once nothing else ran
        idle_since = 0.0
        while True:
            # what the command printed so far is its output, not the control's
            printed += bytes(self._buf)
            self._buf.clear()
            now = time.monotonic()
            kill = [g for g, t in signaled.items() if now - t >= INTERRUPT_GRACE_S]
            _, out = self.control(_interrupt_script(self.bash_pid, keep, kill, self.nonce))
            groups, cpu = [], 0.0
            for kind, value in report.findall(out):
                if kind == b"group":
                    groups.append(value)
                else:
                    ticks, _, hz = value.partition(b" ")
                    cpu = int(ticks or 0) / max(int(hz or 100), 1)
            printed += report.sub(b"", out)
            fresh = [g for g in groups if g not in signaled]
            respawns += bool(fresh and signaled)
            signaled.update((g, now) for g in fresh)
            wait = INTERRUPT_GRACE_S if groups else 0.2
            found = self._read_until(self._done, time.monotonic() + wait)
            if found is not None:
                return found, printed + report.sub(b"", self._take(found))
            if groups:
                idle_cpu = None
                if respawns < RESPAWN_ROUNDS:
                    continue
            elif idle_cpu is None:  # nothing of the command runs: the shell should report
                idle_cpu, idle_since = cpu, time.monotonic()
                continue
            elif cpu - idle_cpu < BUILTIN_CPU_S and time.monotonic() - idle_since < REPORT_GRACE_S:
                continue
            printed += bytes(self._buf)
            self._buf.clear()
            return None, printed

    # ------------------------------------------------------------------ control channel
    def control(
        self, command: str, *, timeout: float = 60.0, stdin: bytes | None = None
    ) -> tuple[int | None, bytes]:
        """Run ``sh -c command`` beside the shell: (status or None on timeout, output).
        A failure of a sandbox past one of its caps raises that cap's error (see ``run``)."""
        self.commands += 1
        try:
            return self._control(command, timeout=timeout, stdin=stdin)
        except Exception:
            check = getattr(self.proc, "check_limits", None)
            if check is not None:
                check()
            raise

    def _control(
        self, command: str, *, timeout: float, stdin: bytes | None
    ) -> tuple[int | None, bytes]:
        if stdin is None:
            self._send("X " + _b64(command))
        else:
            self.proc.write(f"U {len(stdin)} {_b64(command)}\n".encode() + stdin)
        found = self._read_until(self._xdone, time.monotonic() + timeout)
        while found is not None and found.re is self._exit:
            # the agent's shell ended meanwhile: note it, go on waiting for the control answer
            del self._buf[found.start() : found.end()]
            found = self._read_until(self._xdone, time.monotonic() + timeout)
        if found is None:
            return None, bytes(self._buf)
        out = self._take(found)
        # the agent's shell may have finished its command meanwhile (an interrupted one):
        # its end marker, and what came before it, stay for ``run`` to find
        ends = list(self._done.finditer(out))
        if ends:
            self._buf[0:0] = out[: ends[-1].end()]
            out = out[ends[-1].end() :]
        return int(found.group(1)), out[1:] if out.startswith(b"\n") else out

    def shell_state(self) -> tuple[str, str]:
        """(cwd, ``export -p``) of the agent's shell, read through the shell."""
        result = self.run("export -p", timeout=30)
        return self.cwd, result.output

    def close(self) -> None:
        self.proc.kill()


def _interrupt_script(bash_pid: int, keep: str, kill: list[bytes], nonce: str) -> str:
    """Signal the process groups of the shell's live children, except jobs listed in
    ``keep``: SIGKILL to those in ``kill``, SIGINT to the others. Reports the shell's own
    CPU time (``cpu <ticks> <ticks per second>``) and each group signaled (``group <pgid>``)."""
    t = f"__AE_I_{nonce}_"
    kill_list = ",".join(g.decode() for g in kill)
    return (
        f"keep=,{keep},; kill=,{kill_list},; set -- $(cat /proc/{bash_pid}/stat 2>/dev/null); "
        f'echo "{t}cpu $((${{14:-0}} + ${{15:-0}})) $(getconf CLK_TCK 2>/dev/null || echo 100)"; '
        # the children from /proc (no ps: a minimal image has none): "pid (comm) state ppid
        # pgrp ...", the comm cut at its last ") " since it may hold spaces and parens
        'for f in /proc/[0-9]*/stat; do read -r s < "$f" 2>/dev/null || continue; '
        f'set -- ${{s##*) }}; [ "$2" = {bash_pid} ] || continue; '
        "case $1 in Z) ;; *) echo $3 ;; esac; done | sort -u | "
        "while read -r g; do case $keep in *,$g,*) continue ;; esac; "
        "case $kill in *,$g,*) sig=KILL ;; *) sig=INT ;; esac; "
        f'kill -s $sig -- "-$g" 2>/dev/null && echo "{t}group $g"; done; exit 0'
    )
