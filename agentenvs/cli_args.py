"""The ``agentenvs`` command's parser pieces, and what it checks before a subcommand works.

Every user error is one line on stderr, ``agentenvs COMMAND: error: ...``, naming what
is valid and the closest match, with exit status 2, raised before a run directory is
made or a worker, sandbox or model starts, so nothing is left behind:

- the parser (``CommandParser``): unknown options and choices, with the closest one;
  numbers and lists that do not parse or are out of range (the types below);
- ``check_args``, per subcommand: env ids (``agentenvs.envs.lookup``), env kwargs
  against the env constructor's signature, policy specs against the policy's signature
  and the env it reads (``agentenvs.policy.registry.check_policy_spec``), run
  directories and other paths that must exist, demo and dataset names.

Errors the command did not expect (bugs) keep their traceback. The option groups that
several subcommands share (fault bounds, the state analyses, Ray) are built here too.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from agentenvs.core.suggest import UsageError, close_match, did_you_mean, one_line


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Each option's help ends with its default, unless it is a flag, has no default
    (None: its help says what happens) or its help already names it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or default is None
            or default is argparse.SUPPRESS
            or isinstance(default, bool)
            or "default" in text.lower()
        ):
            return text
        if isinstance(default, list | tuple):
            shown = ",".join(map(str, default)) if default else "none"
        else:
            shown = str(default)
        return f"{text} (default: {shown.replace('%', '%%')})"


class CommandParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line naming the closest valid choice
    or option, and whose help shows every default."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is not None and value not in action.choices:
            choices = [str(c) for c in action.choices]
            raise argparse.ArgumentError(
                action,
                f"invalid choice: {value!r}{did_you_mean(str(value), choices)} "
                f"(choose from {', '.join(choices)})",
            )

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = self._innermost(parsed)
            options = [s for a in parser._actions for s in a.option_strings]
            hint = next(
                (
                    did_you_mean(e.partition("=")[0], options)
                    for e in extras
                    if e.startswith("-") and did_you_mean(e.partition("=")[0], options)
                ),
                "",
            )
            parser.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return parsed

    def _innermost(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The (sub)parser of the command that ``parsed`` ran, e.g. ``agentenvs data fetch``."""
        parser: argparse.ArgumentParser = self
        while True:
            sub = next(
                (a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None
            )
            chosen = getattr(parsed, sub.dest, None) if sub is not None else None
            if sub is None or chosen not in sub.choices:
                return parser
            parser = sub.choices[chosen]


# ---------------------------------------------------------------- argument types
def int_list(text: str) -> list[int]:
    """``1,2,4,8``: positive integers (turn budgets, K values)."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers such as 1,2,4,8, got {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(
            f"expected positive integers such as 1,2,4,8, got {text!r}"
        )
    return values


def json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object, e.g. '{\"show_budget\": true}'")
    return value


def _int(text: str, lowest: int, what: str, highest: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < lowest or (highest is not None and value > highest):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    return _int(text, 1, "an integer >= 1")


def non_negative_int(text: str) -> int:
    return _int(text, 0, "an integer >= 0")


def port(text: str) -> int:
    return _int(text, 0, "a port number from 0 (any free one) to 65535", 65535)


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not value >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a rate in [0, 1], got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a rate in [0, 1], got {text!r}")
    return value


#: the help of every ``--tasks`` option
TASKS_HELP = (
    "'all', 'first:N' or task ids: any id the env's reset takes (FrozenLake: "
    "random:size=N,p=P,seed=K and desc:ROW/ROW/... too), separated by commas; a comma "
    "followed by KEY=VALUE continues the id before it, so random:size=8,p=0.8,seed=3 is one id"
)


def tasks_spec(text: str) -> str:
    """``all``, ``first:N`` (N >= 1) or a list of task ids split by
    ``agentenvs.core.task_list.split_task_ids`` (checked against the env when it is
    known: ``agentenvs.eval.runner.resolve_tasks``)."""
    from agentenvs.core.task_list import split_task_ids

    spec = text.strip()
    if spec.startswith("first:"):
        count = spec.partition(":")[2].strip()
        if not count.isdigit() or int(count) < 1:
            raise argparse.ArgumentTypeError(
                f"expected first:N with N >= 1 (e.g. first:10), got {text!r}"
            )
    elif not split_task_ids(spec):
        raise argparse.ArgumentTypeError("expected 'all', 'first:N' or a comma list of task ids")
    return spec


# ---------------------------------------------------------------- subcommands' options
def add_fault_args(sp: argparse.ArgumentParser, item: str) -> None:
    from agentenvs.eval.faults import DEFAULT_FAULT_BACKOFF, DEFAULT_MAX_FAULT_RETRIES

    sp.add_argument(
        "--max-fault-retries",
        type=non_negative_int,
        default=DEFAULT_MAX_FAULT_RETRIES,
        help=f"runs of a {item} again, with its seed, after an infrastructure fault "
        f"(a killed sandbox, a lost database, a model server error; default "
        f"{DEFAULT_MAX_FAULT_RETRIES}); past it the run stops, naming the faults, "
        "and resuming re-runs what faulted. Faults are never scored",
    )
    sp.add_argument(
        "--fault-backoff",
        type=non_negative_float,
        default=DEFAULT_FAULT_BACKOFF,
        help=f"seconds before the first retry, doubled for each one after it "
        f"(default {DEFAULT_FAULT_BACKOFF})",
    )
    sp.add_argument(
        "--max-fault-rate",
        type=rate,
        default=None,
        help="stop the run once faults pass this share of its attempts "
        "(judged after 20 attempts; default: no limit)",
    )


def _state_analysis_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--a", required=True, dest="policy_a", help="policy A, e.g. the RL model")
    sp.add_argument("--b", required=True, dest="policy_b", help="policy B, e.g. the base model")
    sp.add_argument(
        "--run",
        type=Path,
        default=None,
        help="draw states from this run's trajectories (its env and env kwargs)",
    )
    sp.add_argument("--env", default=None, help="env id (with --reference; checked with --run)")
    sp.add_argument(
        "--reference",
        default=None,
        help="draw states from rollouts of this policy instead of a run",
    )
    sp.add_argument(
        "--tasks", type=tasks_spec, default="all", help=f"with --reference: {TASKS_HELP}"
    )
    sp.add_argument(
        "--episodes", type=positive_int, default=8, help="with --reference: rollouts per task"
    )
    sp.add_argument("--budget", type=positive_int, default=10, help="with --reference: turn budget")
    sp.add_argument(
        "--env-kwargs",
        type=json_object,
        default=None,
        help="JSON object for gym.make (with --reference; default: none)",
    )
    sp.add_argument("--states", type=positive_int, default=200, help="states per kind")
    sp.add_argument(
        "--actions", type=positive_int, default=16, help="actions sampled per policy and state"
    )
    sp.add_argument("--seed", type=int, default=0, help="seed of the state draw and the sampling")
    sp.add_argument(
        "--workers",
        type=non_negative_int,
        default=None,
        help="worker processes (0 runs in this process; default: one per CPU, "
        "or 1 when A or B is a model policy: each worker loads its own models)",
    )
    _backend_args(sp)
    add_fault_args(sp, "state")
    sp.add_argument("--out", required=True, type=Path, help="output folder (resumed if it exists)")
    sp.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first in every process (registers plugin policies)",
    )
    sp.add_argument(
        "--n-boot", type=non_negative_int, default=1000, help="bootstrap resamples (0: no CIs)"
    )
    sp.add_argument("--no-plots", action="store_true", help="JSON only (no matplotlib needed)")
    sp.add_argument("--no-progress", action="store_true", help="no progress bar")


def _backend_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="local: this machine's processes; ray: Ray actors (as for eval)",
    )
    sp.add_argument("--address", default=None, help="Ray address with --backend ray")


def open_rate(text: str) -> float:
    """A number strictly between 0 and 1 (a difference, a level, a power)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}")
    return value


def rate_list(text: str) -> list[float]:
    """``0.2,0.5,0.9``: success rates in [0, 1]."""
    return [rate(v.strip()) for v in text.split(",") if v.strip()] or [rate(text)]


def add_plan_parser(sub: Any) -> None:
    """``agentenvs plan``: tasks x samples a paired comparison needs (agentenvs.eval.plan)."""
    pl = sub.add_parser(
        "plan",
        help="how many tasks x samples per task detect a difference, from a pilot run",
    )
    source = pl.add_mutually_exclusive_group(required=True)
    source.add_argument("--pilot", type=Path, default=None,
                        help="a pilot run directory: its per-task success rates per budget")
    source.add_argument("--rates", type=rate_list, default=None,
                        help="assumed per-task success rates instead, e.g. 0.1,0.4,0.8")
    pl.add_argument("--delta", type=open_rate, required=True,
                    help="the true difference to detect, e.g. 0.05 (B's mean minus A's)")
    pl.add_argument("--alpha", type=open_rate, default=0.05, help="two-sided level")
    pl.add_argument("--power", type=open_rate, default=0.8, help="power 1 - beta")
    pl.add_argument("--ks", type=int_list, default=[1, 4], help="K values")
    pl.add_argument("--budgets", type=int_list, default=None,
                    help="the pilot's budgets to plan for (default: all of them)")
    pl.add_argument("--samples", type=int_list, default=None,
                    help="samples per task to consider, e.g. 4,8,16 (default: the pilot's n, "
                    "or 16 with --rates)")
    pl.add_argument("--metric", choices=("pass@k", "pass^k"), default="pass@k",
                    help="pass@k (at least one of K succeeds) or pass^k (all K succeed)")
    pl.add_argument("--sims", type=positive_int, default=1000,
                    help="simulated experiments per task count")
    pl.add_argument("--seed", type=int, default=0, help="simulation seed")
    pl.add_argument("--json", type=Path, default=None, help="also write the plan as JSON here")


def add_check_tasks_parser(sub: Any) -> None:
    """``agentenvs check-tasks``: what of Terminal-Bench dataset folders runs here, and why
    not the rest (agentenvs.envs.terminal.survey)."""
    ct = sub.add_parser(
        "check-tasks",
        help="which Terminal-Bench tasks of dataset folders can run here, each other one's unmet need",
    )
    ct.add_argument("paths", type=Path, nargs="+",
                    help="dataset folders, each a folder of task folders (TB1 or Harbor layout)")
    ct.add_argument("--runtime", choices=("docker", "local"), default="docker",
                    help="the runtime the tasks would run on")
    ct.add_argument("--offline", choices=("auto", "yes", "no"), default="auto",
                    help="docker: build with what this machine has (yes), pull by name (no), "
                    "or ask the engine whether it can pull (auto)")
    ct.add_argument("--build", action="store_true",
                    help="docker: build every accepted task's image instead of predicting")
    ct.add_argument("--force-build", action="store_true",
                    help="docker: judge a task's Dockerfile even where it names a prebuilt "
                    "[environment] docker_image (the env's force_build)")
    ct.add_argument("--json", type=Path, default=None,
                    help="also write every task's verdict (accepted, stood in, refused, invalid) here")


def add_certify_parser(sub: Any) -> None:
    """``agentenvs certify``: contract, fuzz and reward-gaming probe of one env, written
    as a certificate (agentenvs.testing.certify)."""
    cf = sub.add_parser(
        "certify",
        help="what holds of an env (contract, fuzz, reward-gaming probe), as a certificate",
    )
    cf.add_argument("env", help="env id (agentenvs/FrozenLake-v0, MODULE:ID) or a foreign "
                    "env as SOURCE:NAME (gymnasium:Taxi-v4, textarena:GAME, reasoning_gym:NAME)")
    cf.add_argument("--env-kwargs", type=json_object, default={},
                    help="JSON object of env constructor kwargs")
    cf.add_argument("--out", type=Path, default=None,
                    help="write certificate.json and certificate.md here (default: print only)")
    cf.add_argument("--seed", type=int, default=0, help="seed of every part")
    cf.add_argument("--fuzz-episodes", type=positive_int, default=20,
                    help="episodes of hostile actions")
    cf.add_argument("--probe-tasks", type=positive_int, default=10,
                    help="tasks each degenerate policy plays")
    cf.add_argument("--call-limit", type=float, default=60.0,
                    help="seconds one reset, step or restore may take before it is a hang")


def _check_certify(args: argparse.Namespace) -> None:
    check_env(args.env, args.env_kwargs)
    if not args.call_limit > 0:
        raise UsageError(f"--call-limit must be above 0, got {args.call_limit}")


def add_analysis_parsers(sub: Any) -> None:
    sq = sub.add_parser(
        "step-quality",
        help="from the same states, how often each of two policies picks the better action",
    )
    _state_analysis_args(sq)
    es = sub.add_parser(
        "error-states",
        help="step quality from ordinary and error states, and success when continuing",
    )
    _state_analysis_args(es)
    es.add_argument(
        "--continuations",
        type=positive_int,
        default=8,
        help="rollouts to the end per state and policy",
    )
    es.add_argument(
        "--continue-ordinary",
        action="store_true",
        help="also continue from ordinary states (error states always)",
    )
    sv = sub.add_parser(
        "serve",
        help="serve an env over OpenEnv's HTTP/WebSocket protocol, as an MCP server, or over "
        "the Open Reward Standard",
    )
    sv.add_argument("--env", required=True, help="env id, e.g. agentenvs/InterCodeSQL-v0")
    sv.add_argument(
        "--protocol",
        choices=("openenv", "mcp", "ors"),
        default="openenv",
        help="openenv: OpenEnv's WebSocket sessions (default); mcp: one episode per MCP "
        "session, the env's actions as tools; ors: the Open Reward Standard over HTTP, one "
        "episode per ORS session",
    )
    sv.add_argument(
        "--transport",
        choices=("http", "stdio"),
        default="http",
        help="with --protocol mcp: streamable HTTP at /mcp (default), or stdio (one session, "
        "for the client that starts the process)",
    )
    sv.add_argument(
        "--env-kwargs",
        type=json_object,
        default={},
        help="JSON object of gym.make keyword arguments (checked against the env's)",
    )
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback)")
    sv.add_argument("--port", type=port, default=8000, help="port (0 picks a free one)")
    sv.add_argument(
        "--max-sessions",
        type=positive_int,
        default=64,
        help="envs at once: WebSocket sessions and HTTP resets together",
    )
    sv.add_argument(
        "--session-timeout",
        type=non_negative_float,
        default=None,
        help="close a session after this many idle seconds (default: never)",
    )
    sv.add_argument(
        "--max-message-bytes",
        type=positive_int,
        default=None,
        help="largest message served (default: the env's longest action, JSON-escaped, "
        "at least 1 MiB); up to 4x is refused with an error, larger closes",
    )
    sv.add_argument(
        "--share-snapshots",
        action="store_true",
        help="let any session restore any session's snapshot tokens (branching from "
        "many clients); by default a token restores only into its own session",
    )
    sv.add_argument(
        "--max-snapshots",
        type=positive_int,
        default=4096,
        help="snapshots kept in all (the least recently used go first)",
    )
    sv.add_argument(
        "--snapshot-memory",
        type=positive_int,
        default=256 << 20,
        help="bytes of snapshots kept in all (default 256 MiB)",
    )
    sv.add_argument(
        "--snapshot-ttl",
        type=non_negative_float,
        default=3600.0,
        help="a snapshot unused this many seconds expires (0: never)",
    )
    sv.add_argument(
        "--request-timeout",
        type=non_negative_float,
        default=30.0,
        help="seconds for an HTTP request's head, and for its body, to arrive (0: none)",
    )
    sv.add_argument(
        "--stall-timeout",
        type=non_negative_float,
        default=60.0,
        help="disconnect a client that leaves the server's replies unread this many "
        "seconds (0: never)",
    )
    sv.add_argument(
        "--token",
        default=None,
        help="the token clients must send (Authorization: Bearer TOKEN; ?token= on a "
        "WebSocket); default: $AGENTENVS_SERVER_TOKEN, else a new one, printed and written "
        "to a file only you can read ($XDG_RUNTIME_DIR/agentenvs/server-PORT.token, else "
        "/tmp/agentenvs-UID/)",
    )
    sv.add_argument(
        "--no-auth",
        action="store_true",
        help="ask no token (loopback --host only: any local process, but no web page, "
        "can then use the server)",
    )
    sv.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="a Host header to answer besides loopback names on the server's port "
        "(repeatable; e.g. the name clients reach a --host 0.0.0.0 server by)",
    )
    sv.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="SCHEME://HOST[:PORT]",
        help="a browser Origin to answer besides the server's own (repeatable)",
    )
    sv.add_argument(
        "--max-turns-cap",
        type=positive_int,
        default=None,
        help="the largest max_turns a client may ask for (default: the env's own budget)",
    )
    sv.add_argument(
        "--max-connections",
        type=positive_int,
        default=None,
        help="open connections at once; past it a new one is answered 503 "
        "(default: 4 per session, plus 64)",
    )
    from agentenvs.data.cli import add_parser as add_data_parser

    add_data_parser(sub)
    lk = sub.add_parser(
        "likelihood",
        help="per-action NLL of stored trajectories under a model, and the cumulative LLR of two",
    )
    lk.add_argument("run_dirs", type=Path, nargs="+", help="runner run directories")
    lk.add_argument(
        "--model-a", required=True, help="scoring policy spec (NLL, numerator of the LLR)"
    )
    lk.add_argument(
        "--model-b", default=None, help="second scoring policy (denominator of the LLR)"
    )
    lk.add_argument(
        "--history",
        choices=("env", "record"),
        default="env",
        help="env: system prompt and tools from a seeded reset; record: stored text only",
    )
    lk.add_argument("--out", required=True, type=Path, help="output folder (resumed if it exists)")
    lk.add_argument(
        "--workers",
        type=non_negative_int,
        default=0,
        help="worker processes (default 0: models share this process)",
    )
    _backend_args(lk)
    add_fault_args(lk, "trajectory's scoring")
    lk.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first in every process (registers plugin policies)",
    )
    lk.add_argument(
        "--n-boot", type=non_negative_int, default=1000, help="bootstrap resamples (0: no CIs)"
    )
    lk.add_argument("--no-plots", action="store_true", help="JSON only (no matplotlib needed)")
    lk.add_argument("--no-progress", action="store_true", help="no progress bar")
    sm = sub.add_parser(
        "serve-model",
        help="serve a local model over an OpenAI-compatible HTTP API (chat, completions, logprobs)",
    )
    sm.add_argument(
        "--model",
        required=True,
        help="an hf policy spec, e.g. hf:model=PATH,device=cuda,dtype=bfloat16",
    )
    sm.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    sm.add_argument("--port", type=port, default=8000, help="port (0: any free one)")
    sm.add_argument("--name", default=None, help="model name the API reports (default: the spec)")
    key = sm.add_mutually_exclusive_group()
    key.add_argument(
        "--api-key-file", type=Path, default=None, metavar="PATH",
        help="the key clients must send, from a file only you may read (default: "
        "$AGENTENVS_MODEL_API_KEY, else a new random key, written to a 0600 file)",
    )
    key.add_argument(
        "--api-key", default=None, metavar="KEY",
        help="the key, inline (masked in the process title where setproctitle is "
        "installed, else visible to local users: prefer the file or the variable)",
    )
    key.add_argument(
        "--no-auth", action="store_true",
        help="no key (refused unless --host is a loopback address)",
    )
    sm.add_argument(
        "--allow-host", action="append", default=[], metavar="NAME[:PORT]",
        help="a Host name clients may use besides loopback ones (repeatable; '*': any)",
    )
    limits = sm.add_argument_group("limits (per request, then for the server)")
    limits.add_argument("--max-n", type=positive_int, default=16, help="choices a request (n)")
    limits.add_argument("--max-sequences", type=positive_int, default=64,
                        help="sequences a request (n x prompts)")
    limits.add_argument("--max-tokens", type=positive_int, default=4096,
                        help="new tokens a choice (max_tokens)")
    limits.add_argument("--max-prompt-tokens", type=positive_int, default=None,
                        help="tokens of a prompt (default: the model's context length)")
    limits.add_argument("--max-prompt-bytes", type=positive_int, default=1 << 20,
                        help="bytes of a request's prompt text")
    limits.add_argument("--max-body-bytes", type=positive_int, default=4 << 20,
                        help="bytes of a request body (past it: 413, unread)")
    limits.add_argument("--max-queue", type=positive_int, default=32,
                        help="requests admitted at once (past it: 429 at once)")
    limits.add_argument("--request-timeout", type=float, default=300.0, metavar="SECONDS",
                        help="a request's time from admission (past it: 503)")
    limits.add_argument("--read-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="a client's time to send a whole request")
    limits.add_argument("--max-connections", type=positive_int, default=256,
                        help="connections held (past it the longest idle one is closed)")


# ---------------------------------------------------------------- checks per command
#: the modules a model policy loads, by its name in the policy registry, and their extra
POLICY_EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "hf": ("hf", ("torch", "transformers")),
    "vllm": ("vllm", ("vllm",)),
}
#: the commands that draw figures unless given --no-plots
PLOTTING = frozenset({"report", "step-quality", "error-states", "likelihood"})


def check_path(path: Path, what: str, *, manifest: bool = False) -> None:
    """``path`` must exist (a run directory: with its ``manifest.json``); the refusal
    names the closest sibling."""
    if path.exists() and (not manifest or (path / "manifest.json").is_file()):
        return
    if path.exists():
        raise UsageError(
            f"{what} {path} has no manifest.json (not a run directory of agentenvs eval)"
        )
    parent = path.parent if str(path.parent) else Path(".")
    siblings = sorted(p.name for p in parent.iterdir()) if parent.is_dir() else []
    match = close_match(path.name, siblings)
    hint = f"; did you mean {str(parent / match)!r}?" if match is not None else ""
    where = (
        f"{parent} does not exist" if not parent.is_dir() else f"{parent} holds no {path.name!r}"
    )
    if manifest:
        raise UsageError(f"{what} {path} does not exist, so no manifest.json ({where}){hint}")
    raise UsageError(f"{what} {path} does not exist ({where}){hint}")


def check_env(env_id: str, env_kwargs: dict[str, Any] | None = None) -> None:
    from agentenvs.envs.lookup import check_env_id, check_env_kwargs

    check_env_id(env_id)
    if env_kwargs:
        check_env_kwargs(env_id, env_kwargs)


def check_policy(
    spec: str, option: str, env_id: str | None = None, *, scoring: bool = False
) -> None:
    """A policy spec given as ``option``: its name, parameters and env; a scripted policy
    is also built here (its constructor checks the values), as the runner does."""
    from agentenvs.core.errors import require_installed
    from agentenvs.policy.registry import (
        check_policy_spec,
        is_model_policy,
        make_policy,
        parse_policy_spec,
    )

    try:
        check_policy_spec(spec, env_id=env_id, scoring=scoring)
    except UsageError as exc:
        raise type(exc)(f"{option}: {exc}") from None
    name, kwargs = parse_policy_spec(spec)
    if name in POLICY_EXTRAS:
        extra, modules = POLICY_EXTRAS[name]
        require_installed(extra, *modules)
    elif name == "openai" and kwargs.get("tokenizer") is not None:  # a path: a transformers one
        require_installed("hf", "transformers")
    if not is_model_policy(spec):
        try:
            make_policy(spec)
        except (ValueError, TypeError) as exc:  # names are checked: a value is wrong
            raise UsageError(f"{option} {spec}: {one_line(exc)}") from None


def check_names(
    given: Iterable[str], valid: Sequence[str], what: str, refusal: str | None = None
) -> None:
    """Each name must be one of ``valid``; ``refusal`` starts the message (default
    ``unknown WHAT``)."""
    for name in given:
        if name not in valid:
            raise UsageError(
                f"{refusal or f'unknown {what}'} {name!r}{did_you_mean(name, valid)} "
                f"({what}s: {', '.join(valid)})"
            )


def _imports(args: argparse.Namespace) -> None:
    from agentenvs.eval.states import import_modules

    for name in getattr(args, "imports", None) or ():
        try:
            import_modules([name])
        except ImportError as exc:
            raise UsageError(f"--import {name}: {one_line(exc)}") from None


def _check_eval(args: argparse.Namespace) -> None:
    _imports(args)
    if args.envs is not None:  # every env: agentenvs.cli_suite
        from agentenvs.cli_suite import check_suite_args

        return check_suite_args(args)
    if args.env is None:
        raise UsageError("eval needs --env ENV_ID (one env) or --envs all|NAME,... (several)")
    check_env(args.env, args.env_kwargs)
    check_policy(args.policy, "--policy", args.env)
    if args.budget_unit == "turns" and args.max_turns is not None:
        raise UsageError(
            "--max-turns is the turn cap of a token or seconds budget; with --budget-unit "
            "turns, --budgets are the turn budgets"
        )
    if args.show_budget and args.mode == "derive":
        raise UsageError(
            f"--show-budget tells the agent its {args.budget_unit} left, so a run at the "
            "largest budget says nothing about smaller ones: use --mode rerun"
        )


def _check_plan(args: argparse.Namespace) -> None:
    if args.pilot is not None:
        check_path(args.pilot, "--pilot", manifest=True)
    elif args.budgets is not None:
        raise UsageError("--budgets picks a pilot run's budgets; --rates are for one budget")
    if args.sims < 10:
        raise UsageError(f"--sims must be at least 10, got {args.sims}")
    if args.samples is not None and max(args.ks) > max(args.samples):
        raise UsageError(
            f"K={max(args.ks)} needs at least that many samples per task; --samples "
            f"{','.join(map(str, args.samples))} has none"
        )


def _check_report(args: argparse.Namespace) -> None:
    from agentenvs.eval.suite import is_suite_dir

    if is_suite_dir(args.run_dir):  # an every-env folder: its summary page
        return
    check_path(args.run_dir, "run directory", manifest=True)
    if args.compare is not None:
        check_path(args.compare, "--compare", manifest=True)


def _check_state_analysis(args: argparse.Namespace) -> None:
    _imports(args)
    env_id = args.env
    if args.run is not None:
        check_path(args.run, "--run", manifest=True)
        from agentenvs.eval.records import read_manifest

        env_id = read_manifest(args.run)["config"]["env_id"]
    if env_id is not None:
        check_env(env_id, args.env_kwargs if args.run is None else None)
    check_policy(args.policy_a, "--a", env_id)
    check_policy(args.policy_b, "--b", env_id)
    if args.reference is not None:
        check_policy(args.reference, "--reference", env_id)


def _check_likelihood(args: argparse.Namespace) -> None:
    _imports(args)
    for run_dir in args.run_dirs:
        check_path(run_dir, "run directory", manifest=True)
    check_policy(args.model_a, "--model-a", scoring=True)
    if args.model_b is not None:
        check_policy(args.model_b, "--model-b", scoring=True)


def _check_demo(args: argparse.Namespace) -> None:
    from agentenvs.cli_demo import DEMO_SUITES

    if args.envs is not None:
        names = [n.strip() for n in args.envs.split(",") if n.strip()]
        if not names:
            raise UsageError("--envs names no demo env")
        check_names(names, [s.name for s in DEMO_SUITES], "demo env", "--envs names no demo env")
    if args.tasks is not None and args.tasks != "all" and not args.tasks.startswith("first:"):
        # task ids must exist in every chosen env, or a later env would stop the demo
        from agentenvs.eval.runner import resolve_tasks

        chosen = set(args.envs.split(",")) if args.envs else None
        for suite in DEMO_SUITES:
            if chosen is None or suite.name in chosen:
                resolve_tasks(suite.env_id, args.tasks, suite.env_kwargs)


def _check_serve(args: argparse.Namespace) -> None:
    if args.max_sessions < 1:
        raise UsageError(f"--max-sessions must be at least 1, got {args.max_sessions}")
    if args.transport == "stdio" and args.protocol != "mcp":
        raise UsageError("--transport stdio needs --protocol mcp")
    if args.no_auth and args.token:
        raise UsageError("--no-auth and --token contradict each other: give one")
    if args.no_auth and not args.transport == "stdio":
        from agentenvs.server.access import is_loopback

        if not is_loopback(args.host):
            raise UsageError(
                f"--no-auth serves only a loopback --host, got {args.host!r}: anyone who "
                "reaches that address could act in the env (run shell commands, SQL, "
                "programs); keep the token"
            )
    check_env(args.env, args.env_kwargs)


def _check_serve_model(args: argparse.Namespace) -> None:
    from agentenvs.policy.registry import parse_policy_spec

    if parse_policy_spec(args.model)[0] != "hf":
        raise UsageError(
            f"--model must be an hf:model=PATH spec (the server runs it), got {args.model!r}"
        )
    check_policy(args.model, "--model")
    if args.no_auth:
        from agentenvs.policy.serve_http import is_loopback

        if not is_loopback(args.host):
            raise UsageError(
                f"--no-auth serves loopback only, not --host {args.host}: drop --no-auth (a "
                "key is made for you) or bind 127.0.0.1"
            )
    if args.request_timeout <= 0 or args.read_timeout <= 0:
        raise UsageError("--request-timeout and --read-timeout must be > 0 seconds")


def _check_data(args: argparse.Namespace) -> None:
    from agentenvs.data.registry import DATASETS

    name = getattr(args, "name", None)
    if name is not None:
        check_names([name], sorted(DATASETS), "dataset")


CHECKS = {
    "eval": _check_eval,
    "report": _check_report,
    "plan": _check_plan,
    "demo": _check_demo,
    "step-quality": _check_state_analysis,
    "error-states": _check_state_analysis,
    "likelihood": _check_likelihood,
    "serve": _check_serve,
    "serve-model": _check_serve_model,
    "data": _check_data,
    "certify": _check_certify,
}


def check_extras(args: argparse.Namespace) -> None:
    """The extras the command's options need beyond the core dependencies, checked
    installed (not imported): a one-line ``MissingExtraError`` naming the extra."""
    from agentenvs.core.errors import MissingExtraError, require_installed

    if getattr(args, "backend", None) == "ray":
        require_installed("ray", "ray")
    if args.command == "demo":  # its reports are tables and figures
        require_installed("plot", "matplotlib")
    elif args.command in PLOTTING and not args.no_plots:
        try:
            require_installed("plot", "matplotlib")
        except MissingExtraError as exc:
            raise UsageError(f"{exc}, or give --no-plots for no figures") from None


def check_args(args: argparse.Namespace) -> None:
    """Every check of ``args.command`` that needs no work (nothing is built but scripted
    policies, nothing is written): a ``UsageError`` when one fails, a ``MissingExtraError``
    when an option needs an extra that is not installed."""
    check = CHECKS.get(args.command)
    if check is not None:
        check(args)
    check_extras(args)
