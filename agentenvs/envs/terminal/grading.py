"""The two gradings of a Terminal-Bench episode, and what they share.

``grading="safe"`` (the default of ``TerminalBenchEnv``) grades a task's end state as its
tests see it, never the agent's processes or anything it left for the tests' own session
to run:

1. **The freeze.** At submit or budget end every process of the agent's session is
   stopped (Docker: the engine kills the container, whose filesystem stays; local: every
   process of the sandbox's pid namespace is SIGKILLed until none is left, its files are
   copied out and unpacked into a new sandbox). How many were stopped is
   ``info["processes_stopped"]``.
2. **The verifier** (``agentenvs.envs.terminal.verifier``): the tests run on a toolchain
   the agent never had (the project's tree, read-only, after the freeze; the task's tests
   read-only at ``/tests``), in an environment built from nothing, and their verdict comes
   on a channel only the verifier's pytest may write. The image's files are the agent's to
   change: an honest repair of ``/usr/local/bin/tool`` is graded by the tests.

``grading="official"`` runs the tests as TB1 and Harbor do, in the agent's container
beside its processes, through the agent's shell's pipe, on the image's toolchain and
whatever the agent left in it: comparable with published numbers, and open to every
attack the batteries in ``tests/envs/test_terminal_attacks.py`` and
``tests/envs/test_terminal_verifier.py`` list.
"""

from __future__ import annotations

import re

GRADINGS = ("safe", "official")
#: a task tag: its tests check processes the agent left running, which safe grading
#: stops first; such a task runs under ``grading="official"`` only
AGENT_PROCESSES_TAG = "agent-processes"
#: a path in a Python standard library (``/usr/lib/python3.13/...``, ``/usr/local/...``)
STDLIB = re.compile(r"^/usr(?:/local)?/lib/python3(?:\.\d+)?(?:/|$)")
