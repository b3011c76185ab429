"""Terminal-Bench's verdict: the task's tests run on the end state, and their results read.

``TaskTests`` holds the steps ``TerminalBenchEnv`` takes at submit or at the end of its
budget, apart from the agent's runtime: under ``grading="safe"`` the freeze, the toolchain
check and the tests in a new session (the rules are ``grading.py``'s); under
``"official"`` the tests in the agent's own shell, as TB1 and Harbor run them. Then the
results: pytest's summary, Harbor's reward files (``read_rewards``), what the offline
stand-ins could not provide, and from them the success and score of the episode.
"""

from __future__ import annotations

import json
import math
import shlex
import tarfile
import time
from pathlib import Path
from typing import Any

from agentenvs.core.errors import SandboxError
from agentenvs.envs.terminal.copies import RESULT_BYTES, OverLimit
from agentenvs.envs.terminal.faults import SANDBOX_FAILURES
from agentenvs.envs.terminal.parser import ParseError, is_resolved, parse_results
from agentenvs.envs.terminal.shell import ShellSession

#: what reading data the agent made can raise besides OSError (its archives, its trees,
#: its text): on the grading path these are the agent's doing, like a failed step
AGENT_DATA_ERRORS = (RecursionError, ValueError, EOFError, MemoryError, tarfile.TarError)
#: where the offline stand-ins note what they could not provide (see offline.LOG)
OFFLINE_LOG = "/logs/agentenvs-offline.log"


class TaskTests:
    """The test run and verdict of a ``TerminalBenchEnv`` (a base of it, not an env alone).

    It reads the env's ``task``, ``grading``, ``runtime()``, its shell (``_shell``,
    ``_new_session``) and its fault handling (``_check_fault``, ``_lose``, ``_lost``), and
    keeps the verdict in the env's episode state: ``_tested``, ``_results``,
    ``_harbor_reward``, ``_rewards``, ``_unmet``, ``_test_output``, ``_findings`` and
    ``_stopped``. Step rewards (``step_rewards=True``) grade copies of the state in the
    env's ``_copy_grader()``, keeping the last fraction in ``_fraction``.
    """

    task: Any
    grading: str
    _shell: ShellSession | None
    _lost: str | None
    _fraction: float
    #: the task's tests ran past its verifier timeout and were stopped (this grading)
    _verifier_timed_out: bool = False

    def _upload_tests(self, shell: ShellSession) -> None:
        from agentenvs.envs.terminal.images import tar_of

        pairs = self._test_pairs()
        # as Harbor does, stale rewards go first
        rc, out = shell.control(
            "rm -rf /tests/* /tests/.[!.]* 2>/dev/null; "
            "rm -f /logs/verifier/reward.txt /logs/verifier/reward.json; "
            "mkdir -p /tests /logs/verifier && tar -x -C / --no-same-owner",
            stdin=tar_of(pairs),
        )
        if rc != 0:
            raise SandboxError(f"cannot copy the tests: {out.decode(errors='replace')}")

    def _test_command(self, shell: ShellSession) -> str:
        task = self.task
        limit = task.max_test_timeout_sec
        script = "/tests/run-tests.sh" if task.layout == "tb1" else "/tests/test.sh"
        env = self.runtime().test_environment(task)
        assigns = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(env.items()))
        return (
            f"rm -f {OFFLINE_LOG} 2>/dev/null; cd {shlex.quote(shell.workdir)} && env -i {assigns} "
            f"timeout -s KILL {limit:g} bash {script} 2>&1"
        )

    def run_tests(self) -> tuple[dict[str, bool], float | None, str]:
        """Run the task's tests in the current state: (results, harbor reward, output).

        Named Harbor rewards land in ``self._rewards``; what the offline stand-ins could
        not provide in ``self._unmet``. A sandbox that can no longer run them (wrecked by
        the agent) is replaced by a fresh one of the task's image, and the output says so.
        """
        task = self.task
        self._findings, self._stopped = [], 0
        self._problems, self._exposed = [], []
        self._verifier_timed_out = False
        if task.separate_verifier:
            return self._grade_separate()
        if self._shell is not None:
            try:
                if self.grading == "safe":
                    return self._grade_safe(self._shell)
                return self._run_tests_in(self._shell, "")
            except OverLimit as exc:
                # the end state (or a verdict file) is past the copy limits: nothing was
                # copied, and the agent's files are not graded
                self._findings = [f"the end state was not graded: {exc}"]
                return {}, None, f"[{exc}]"
            except (*SANDBOX_FAILURES, *AGENT_DATA_ERRORS) as exc:
                # the freeze, the grader's session, the copies in and out, reading the
                # agent's files: a fault of any is never a 0 (the runtime's evidence says
                # which); anything else after the freeze is the agent's doing (its files,
                # its programs run by the tests), lost as in a step, never out of step
                # (an error of the grader's own code is neither: it is raised)
                self._check_fault(exc)
                self._lose(str(exc) or type(exc).__name__)
                self._findings = []
                self._verifier_timed_out = False  # the fresh sandbox's run decides
        note = (
            f"[the sandbox could not run the tests ({self._lost}); they ran in a fresh "
            "sandbox of the task's image, without the agent's changes]\n"
        )
        shell = self._new_session(task)
        try:
            self.runtime().starting_state(task, shell)
            if self.grading == "safe":
                results, reward, output = self._grade_safe(shell)
                shell = self._shell or shell
                return results, reward, note + output
            return self._run_tests_in(shell, note)
        except SANDBOX_FAILURES as exc:
            self._check_fault(exc)
            raise
        finally:
            if self._shell is not None:
                shell.close()
            self._shell = None

    #: the separate verifier's task while its tests run (``TerminalBenchEnv.task`` is it)
    _verifier_view: Any = None

    def _grade_separate(self) -> tuple[dict[str, bool], float | None, str]:
        """Harbor's separate verifier (``[verifier] environment_mode = "separate"``): every
        process of the agent's container is stopped and, of its files, only
        ``/logs/artifacts`` and the task's ``artifacts`` are carried over (read through the
        engine); the tests run in a fresh container of the verifier's own image (the
        agent's container is gone), under safe grading on the verifier's toolchain there."""
        from agentenvs.envs.terminal.steps import verifier_view

        task = self.task
        runtime = self.runtime()
        carried, note, stopped = b"", "", 0
        if self._shell is not None and self._lost is None:
            try:
                carried, stopped = runtime.carry_out(task.artifacts)
            except OverLimit as exc:
                note = f"[the artifacts were not carried to the verifier: {exc}]\n"
            except SANDBOX_FAILURES as exc:
                self._check_fault(exc)
                note = f"[the artifacts were not carried to the verifier: {exc}]\n"
        view = self._verifier_view = verifier_view(task)
        try:
            shell = self._new_session(view)
            runtime.starting_state(view, shell)
            if carried:
                rc, out = shell.control("tar -x -C / --no-same-owner", stdin=carried)
                if rc != 0:
                    raise SandboxError(
                        f"cannot lay out the artifacts: {out.decode(errors='replace')[-300:]}"
                    )
            if self.grading == "safe":
                results, reward, output = self._grade_safe(shell)
            else:
                results, reward, output = self._run_tests_in(shell, "", upload=False)
        except SANDBOX_FAILURES as exc:
            self._check_fault(exc)
            raise
        finally:
            self._verifier_view = None
        self._stopped += stopped
        return results, reward, note + output

    def _test_pairs(self) -> list[tuple[Path, str]]:
        task = self.task
        pairs = [(task.tests_dir, "/tests")]
        if task.layout == "tb1":
            pairs.append((task.path / task.test_script, "/tests/run-tests.sh"))
        if task.steps:
            # as Harbor: the shared tests (when there are any), the step's laid over them
            pairs = [
                (d, "/tests") for d in (task.tests_dir, task.step_tests_dir) if d and d.is_dir()
            ]
        return pairs

    def _test_files(self) -> dict[str, bytes]:
        """The test files the grading shows at ``/tests`` (a step's over the shared ones)."""
        from agentenvs.envs.terminal.verifier import rules

        files: dict[str, bytes] = {}
        for src, dest in self._test_pairs():
            if dest == "/tests" and src.is_dir():
                files.update(rules.task_test_files(src))
        return files

    def _grade_safe(self, shell: ShellSession) -> tuple[dict[str, bool], float | None, str]:
        """Grade as ``verifier`` says: freeze, then the tests on the verifier's toolchain,
        in an environment built from nothing, their verdict on the verifier's channel."""
        from agentenvs.envs.terminal import verifier
        from agentenvs.envs.terminal.verifier import rules, tree
        from agentenvs.envs.terminal.verifier.channel import VerdictChannel

        task = self.task
        runtime = self.runtime()
        files = self._test_files()
        counted, shipped = rules.count_tests(files), rules.digests(files)
        stage = verifier.Stage(self._test_pairs())
        channel: VerdictChannel | None = None
        try:
            frozen = runtime.freeze(task, shell, lambda: self._new_session(task), stage)
            self._shell = None
            self._stopped = frozen.stopped
            grader = self._shell = frozen.open()
            channel = VerdictChannel(
                frozen.channel_dir(stage),
                python=frozen.python,
                boot=f"{tree.MOUNT}/boot.py",
                trusted=frozen.trusted,
            )
            links = rules.links_into(frozen.links())
            rc, out = grader.control(verifier.prepare_home(stage))
            if rc != 0:
                raise SandboxError(
                    f"cannot prepare the verifier's home: {out.decode(errors='replace')[-500:]}"
                )
            hook = getattr(runtime, "before_tests", None)
            if hook is not None:
                hook(task)
            path, declared, home = runtime.verifier_declared(task)
            env = verifier.environment(
                stage,
                path=path,
                declared=declared,
                agent_home=home,
                layout=task.layout,
                workdir=grader.workdir,
            )
            limit = task.max_test_timeout_sec
            script = "/tests/run-tests.sh" if task.layout == "tb1" else "/tests/test.sh"
            assigns = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(env.items()))
            marker = f"__AE_VERIFIER_{stage.mark}__"
            # a [verifier] user runs the tests in a session of its own (Docker), its HOME
            # its own; the toolchain is world-readable, the channel checks each process
            opener = getattr(runtime, "verifier_session", None)
            runner = opener(task) if opener is not None else None
            if runner is not None:
                grader.control(f"rm -f {OFFLINE_LOG}")
                rc, out = grader.control(
                    f"chown -R {shlex.quote(task.verifier_user)} {shlex.quote(stage.home)}"
                )
                if rc != 0:
                    runner.close()
                    raise SandboxError(
                        f"cannot give the verifier's home to {task.verifier_user!r}: "
                        + out.decode(errors="replace")[-300:]
                    )
            started = time.monotonic()
            try:
                rc, out = (runner or grader).control(
                    f"rm -f {OFFLINE_LOG} 2>/dev/null; cd {shlex.quote(grader.workdir)} && "
                    f"env -i {assigns} timeout -s KILL {limit:g} bash {script} 2>&1; "
                    f"printf '\\n{marker}%d\\n' $?; "
                    "cat /logs/verifier/reward.json 2>/dev/null; "
                    f"printf '\\n{marker}\\n'; cat /logs/verifier/reward.txt 2>/dev/null; exit 0",
                    timeout=limit + 30,
                )
            finally:
                if runner is not None:
                    runner.close()
            # (the control channel drops a leading newline: a silent script's marker is first)
            text = "\n" + out.decode("utf-8", errors="replace")
            output, _, tail = text.partition(f"\n{marker}")
            output = output[1:]
            code, _, at_exit = tail.partition("\n")
            if killed_at_limit(rc, code.strip(), time.monotonic() - started, limit):
                self._verifier_timed_out = True
                output += f"\n[tests timed out after {limit:g} s]"
            # every process the tests left is stopped before the verdict is read
            self._stopped += frozen.stop()
            now = {
                name: frozen.fetch(path)
                for name, path in (
                    ("log", OFFLINE_LOG),
                    ("json", "/logs/verifier/reward.json"),
                    ("txt", "/logs/verifier/reward.txt"),
                )
            }
            self._shell = frozen.resume()
        finally:
            if channel is not None:
                channel.close()
            stage.close()
        text_now = {k: (v or b"").decode("utf-8", errors="replace") for k, v in now.items()}
        json_at_exit, _, txt_at_exit = at_exit.partition(f"\n{marker}\n")
        verdict = rules.judge(channel.sessions, counted, shipped, refused=channel.refused)
        verdict.findings += links
        return self._verifier_results(
            verdict,
            counted,
            output,
            text_now,
            (json_at_exit.strip(), txt_at_exit.strip()),
        )

    def _verifier_results(
        self,
        verdict: Any,
        counted: dict[str, set[str]],
        output: str,
        now: dict[str, str],
        at_exit: tuple[str, str],
    ) -> tuple[dict[str, bool], float | None, str]:
        """The episode's verdict from the verifier's: results by test name, Harbor's
        reward believed only beside a report that agrees, findings and problems noted."""
        task = self.task
        self._findings = list(verdict.findings)
        self._exposed = list(verdict.exposed)
        self._problems = list(verdict.problems)
        if (now["json"].strip(), now["txt"].strip()) != at_exit:
            self._findings.append(
                "a reward file changed after the test script exited (a process it left wrote it)"
            )
        uses_pytest = any(counted.values())
        if not uses_pytest:
            self._problems = []  # no pytest tests: the task's own script decides
        results = dict(verdict.results)
        for names in counted.values():
            for name in names:
                if not any(k == name or k.startswith(name + "[") for k in results):
                    results[name] = False  # counted, never reported: failed
        output += "".join(f"\n[verifier: {p}]" for p in self._problems)
        if not uses_pytest and task.layout == "tb1":
            return self._read_results(output, now["log"], now["json"], now["txt"])
        self._unmet = sorted({ln.strip() for ln in now["log"].splitlines() if ln.strip()})
        if self._unmet:
            output += "\n[offline: could not provide " + "; ".join(self._unmet) + "]"
        reward: float | None = None
        self._rewards = {}
        if task.layout == "harbor":
            reward, self._rewards, problem = read_rewards(now["json"], now["txt"])
            if problem:
                output += f"\n[{problem}: counted as a failure]"
            elif uses_pytest and not verdict.passed and reward >= 1.0:
                self._findings.append(
                    "the reward file says the task is solved where the verifier's report "
                    "says its tests did not all pass"
                )
        elif self._problems:
            reward = -1.0 if not results else None
        return results, reward, output

    def _run_tests_in(
        self, shell: ShellSession, note: str, upload: bool = True
    ) -> tuple[dict[str, bool], float | None, str]:
        task = self.task
        if upload:
            self._upload_tests(shell)
        else:  # the image holds its tests (a separate verifier's): stale rewards go
            shell.control("rm -f /logs/verifier/reward.txt /logs/verifier/reward.json")
        hook = getattr(self.runtime(), "before_tests", None)
        if hook is not None:
            hook(task)
        limit = task.max_test_timeout_sec
        if task.run_tests_in_same_shell and not note:
            result = shell.run("export TEST_DIR=/tests; bash /tests/run-tests.sh", limit)
            output = result.output
            if result.timed_out:
                self._verifier_timed_out = True
                output += f"\n[tests timed out after {limit:g} s]"
        else:
            # a [verifier] user runs the test script in a session of its own (Docker)
            opener = getattr(self.runtime(), "verifier_session", None)
            runner = opener(task) if opener is not None else None
            if runner is not None:  # a stale note of the stand-ins goes as root
                shell.control(f"rm -f {OFFLINE_LOG}")
            started = time.monotonic()
            try:
                rc, out = (runner or shell).control(
                    self._test_command(runner or shell), timeout=limit + 30
                )
            finally:
                if runner is not None:
                    runner.close()
            output = out.decode("utf-8", errors="replace")
            if killed_at_limit(rc, str(rc), time.monotonic() - started, limit):
                self._verifier_timed_out = True
                output += f"\n[tests timed out after {limit:g} s]"
        output = note + output
        # each verdict file read up to RESULT_BYTES (and one byte more, to tell it was cut)
        head = f"head -c {RESULT_BYTES + 1}"
        rc, out = shell.control(
            f"{head} {OFFLINE_LOG} 2>/dev/null; echo; echo __AE_JSON__; "
            f"{head} /logs/verifier/reward.json 2>/dev/null; echo; echo __AE_TXT__; "
            f"{head} /logs/verifier/reward.txt 2>/dev/null; exit 0"
        )
        if rc != 0:
            raise SandboxError("cannot read the test results")
        # (the agent's processes may print into this pipe too: each file is cut by head,
        # what else came is theirs, as in TB1 and Harbor)
        text = out.decode("utf-8", errors="replace")
        unmet, _, rest = text.partition("__AE_JSON__")
        reward_json, _, reward_txt = rest.partition("__AE_TXT__")
        return self._read_results(output, unmet, reward_json, reward_txt)

    def _read_results(
        self, output: str, unmet: str, reward_json: str, reward_txt: str
    ) -> tuple[dict[str, bool], float | None, str]:
        task = self.task
        self._unmet = sorted({line.strip() for line in unmet.splitlines() if line.strip()})
        if self._unmet:
            output += "\n[offline: could not provide " + "; ".join(self._unmet) + "]"
        reward: float | None = None
        self._rewards = {}
        if task.layout == "harbor":
            reward, self._rewards, problem = read_rewards(reward_json, reward_txt)
            if problem:
                output += f"\n[{problem}: counted as a failure]"
        try:
            results = parse_results(task.parser_name, output)
        except ParseError as exc:
            results = {}
            if reward is None:
                output += f"\n[{exc}: counted as a failure]"
                reward = -1.0  # marks a parse error: not resolved, score 0
        return results, reward, output

    def _run_tests(self) -> str:
        self._results, self._harbor_reward, self._test_output = self.run_tests()
        self._tested = True
        passed = sum(self._results.values())
        lines = [f"Tests: {passed}/{len(self._results)} passed."]
        if self._verifier_timed_out:
            # its own outcome, not a failed test: the tests never finished
            limit = self.task.max_test_timeout_sec
            lines = [
                f"Tests: timed out after {limit:g} s (the task's verifier timeout) and were "
                "stopped: the task counts as failed, whatever they reported before."
            ]
        if self._findings:
            lines = [
                "Not graded (scored 0): the agent changed what grades it:",
                *(f"- {f}" for f in self._findings),
            ] + (lines if self._results else [])
        if not self._verifier_timed_out:
            lines += [f"FAILED {name}" for name, ok in self._results.items() if not ok]
        lines += [f"Verifier: {problem}" for problem in self._problems]
        if self._verifier_timed_out:
            pass  # a reward file written before the stop is not a verdict (nor in Harbor)
        elif len(self._rewards) > 1:
            lines.append("Rewards: " + ", ".join(f"{k}={v:g}" for k, v in self._rewards.items()))
        elif self._harbor_reward is not None and self._harbor_reward >= 0:
            lines.append(f"Reward: {self._harbor_reward:g}")
        if self._unmet:
            lines.append(
                "Offline, these could not be provided (the verdict may differ from an "
                "online run): " + "; ".join(self._unmet)
            )
        if self._test_output.startswith("[the sandbox could not run the tests"):
            lines.append(self._test_output.splitlines()[0])
        if self.task.steps:
            step = self.task.steps[self._step_index]
            verdict = "passed" if self._success_now() else "failed"
            lines.append(f"Step {self._step_index + 1} ({step.name}) {verdict}.")
        else:
            lines.append("Task resolved." if self._success_now() else "Task not resolved.")
        return "\n".join(lines)

    def _step_reward(self, action_valid: bool) -> float:
        """The change in the fraction of tests passed that the step just taken made: from
        the episode's verdict once the tests ran, else graded on a copy of the state
        (``_copy_fraction``); 0 for an invalid action that ended nothing."""
        if self._tested:
            now = self._score_now()
        elif not action_valid:
            return 0.0
        else:
            now = self._copy_fraction()
        change, self._fraction = now - self._fraction, now
        return change

    def _copy_fraction(self) -> float:
        """The fraction of tests the current state passes, graded in another env's sandbox
        (``_copy_grader``) from a snapshot: the agent's sandbox runs nothing of the tests."""
        copy = self._copy_grader()
        copy.restore(self.snapshot())  # a Fault here has left the copy for a new restore
        copy._run_tests()
        return copy._score_now()

    # ---------------------------------------------------------------- steps
    # a multi-step trial (Harbor ``[[steps]]``, see ``agentenvs.envs.terminal.steps``): the
    # env keeps the step being played and each step's verdict; once the trial is over its
    # success and score are the trial's rewards, as the task's strategy makes them
    _step_index: int = 0
    _step_results: list[dict[str, Any]]
    _steps_over: bool = False

    def _record_step(self) -> str | None:
        """Keep the verdict of the step just graded; why the trial stops after it (None:
        the next step may run)."""
        from agentenvs.envs.terminal.steps import step_rewards, stops_after

        step = self.task.steps[self._step_index]
        rewards = step_rewards(
            self._rewards, self._harbor_reward, usable=not self._verifier_timed_out
        )
        if rewards is not None and (self._findings or getattr(self, "_problems", None)):
            # safe grading found the agent changed what grades it: nothing of it counts
            rewards = dict.fromkeys(rewards, 0.0)
        self._step_results.append(
            {
                "name": step.name,
                "rewards": rewards,
                "success": self._success_now(),
                "score": self._score_now(),
                "verifier_timed_out": self._verifier_timed_out,
            }
        )
        return stops_after(step, rewards)

    def _trial_rewards(self) -> dict[str, float] | None:
        from agentenvs.envs.terminal.steps import trial_rewards

        results = [r["rewards"] for r in self._step_results]
        return trial_rewards(self.task.multi_step_reward_strategy, results)

    def _success_now(self) -> bool:
        if self._steps_over:
            rewards = self._trial_rewards()
            return rewards is not None and all(v >= 1.0 for v in rewards.values())
        if not self._tested or self._findings or getattr(self, "_problems", None):
            return False
        if self._verifier_timed_out:
            return False  # as Harbor and TB1: a verifier timeout is the task's failure
        if self._rewards:
            return all(v >= 1.0 for v in self._rewards.values())
        if self._harbor_reward is not None:
            return self._harbor_reward >= 1.0
        return is_resolved(self._results)

    def _score_now(self) -> float:
        if self._steps_over:
            rewards = self._trial_rewards()
            if not rewards:
                return 0.0
            return min(max(sum(rewards.values()) / len(rewards), 0.0), 1.0)
        if not self._tested or self._findings or self._verifier_timed_out:
            return 0.0
        if getattr(self, "_problems", None) and self._harbor_reward is None:
            return sum(self._results.values()) / max(len(self._results), 1)
        if self._harbor_reward is not None:
            return max(self._harbor_reward, 0.0)
        if not self._results:
            return 1.0  # resolved officially (see is_resolved)
        return sum(self._results.values()) / len(self._results)


def killed_at_limit(rc: int | None, status: str, elapsed_s: float, limit_s: float) -> bool:
    """Whether the tests were stopped at their time limit: the run gave no answer in time
    (``rc`` None), the script gave no status, or its status is ``timeout -s KILL``'s
    (137) once the limit had passed. A script that ends with 137 sooner (a program of its
    own SIGKILLed) was not timed out."""
    if rc is None or status == "":
        return True
    return status == "137" and elapsed_s >= limit_s


def read_rewards(reward_json: str, reward_txt: str) -> tuple[float, dict[str, float], str]:
    """Harbor's verdict: ``reward.json`` first (a number or named numbers), else
    ``reward.txt``: (reward in [0, 1], or -1 when unusable; named rewards; problem)."""
    text = reward_json.strip()
    if text:
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            return -1.0, {}, "reward.json is not valid JSON"
        values = data if isinstance(data, dict) else {"reward": data}
        rewards: dict[str, float] = {}
        for key, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                return -1.0, {}, f"reward.json: {key!r} is not a number"
            if not math.isfinite(value):
                return -1.0, {}, f"reward.json: {key!r} is not finite"
            rewards[str(key)] = float(value)
        if not rewards:
            return -1.0, {}, "reward.json holds no reward"
        mean = sum(rewards.values()) / len(rewards)
        return min(max(mean, 0.0), 1.0), rewards, ""
    text = reward_txt.strip()
    if not text:
        return -1.0, {}, "no reward file (/logs/verifier/reward.txt or reward.json)"
    try:
        value = float(text)
    except ValueError:
        return -1.0, {}, "reward.txt is not a number"
    if not math.isfinite(value):
        return -1.0, {}, "reward.txt is not finite"
    return min(max(value, 0.0), 1.0), {}, ""
