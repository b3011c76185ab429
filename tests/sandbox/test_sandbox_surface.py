"""What kernel and host surface a sandbox reaches: socket families (an allow-list: AF_UNIX,
AF_INET, AF_INET6), ``io_uring``, and, in local sandboxes, the host's ``/etc`` (an
allow-list of what programs read: no package managers' config, no secrets).

Each probe runs inside the sandbox: the local one (``bwrap``), the Docker one (``docker``),
and a terminal env's ``step`` on each runtime.
"""

from __future__ import annotations

import base64
import json
import platform
import re
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from _services import require_bwrap, require_docker

from agentenvs.sandbox import PyCase, Sandbox, make_sandbox
from agentenvs.sandbox._local_bwrap import ETC_SHOWN
from agentenvs.sandbox._seccomp import SOCKET_FAMILIES
from agentenvs.sandbox._seccomp_docker import profile

ALLOWED = set(SOCKET_FAMILIES.values())
FIXTURES = Path(__file__).parent.parent / "envs" / "terminal_fixtures"

#: every family 0..45 x every socket type; ``socketpair`` for each family; a refused family
#: carried in the high bits of the argument; ``io_uring_setup``. Prints one JSON line.
PROBE = r"""
import ctypes, errno, json, platform
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
socket_nr, io_uring_nr = {"x86_64": (41, 425), "aarch64": (198, 425)}[platform.machine()]

def err():
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))

opened, refused = [], {}
for fam in range(46):
    for typ in (1, 2, 3, 4, 5, 6, 10):
        fd = libc.socket(fam, typ, 0)
        if fd >= 0:
            opened.append([fam, typ])
            libc.close(fd)
        elif typ == 1:
            refused[fam] = err()
pairs = []
for fam in range(46):
    sv = (ctypes.c_int * 2)()
    if libc.socketpair(fam, 1, 0, sv) == 0:
        pairs.append(fam)
        libc.close(sv[0]); libc.close(sv[1])
high = {}
for fam in (16, 40):  # AF_NETLINK, AF_VSOCK with bits above the int
    fd = libc.syscall(ctypes.c_long(socket_nr), ctypes.c_long((1 << 32) | fam),
                      ctypes.c_long(1), ctypes.c_long(0))
    high[fam] = "open" if fd >= 0 else err()
params = ctypes.create_string_buffer(120)
ring = libc.syscall(ctypes.c_long(io_uring_nr), ctypes.c_long(4), params)
print("PROBE=" + json.dumps({"opened": opened, "refused": refused, "pairs": pairs,
                             "high": high, "io_uring": "open" if ring >= 0 else err()}))
"""

#: i386's getpid through ``int 0x80`` from a 64-bit process: the i386 ABI, whose
#: ``socketcall`` would carry the family behind a pointer no filter can read
I386_CALL = r"""
import ctypes, mmap
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3]))  # mov eax, 20; int 0x80; ret
call = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
print("i386 getpid:", call(), flush=True)
"""

#: a TCP and a UDP echo over the loopback and an AF_UNIX pair: what the allowed families
#: are for
ECHO = r"""
import socket
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
cli = socket.create_connection(srv.getsockname()); conn, _ = srv.accept()
cli.sendall(b"tcp"); got = [conn.recv(3).decode()]
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0))
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"udp", u.getsockname())
got.append(u.recv(3).decode())
a, b = socket.socketpair(); a.sendall(b"unix"); got.append(b.recv(4).decode())
print(" ".join(got))
"""

#: host files a sandbox must not read (wherever the host has them)
SECRETS = (
    "/etc/pip.conf", "/etc/xdg/pip/pip.conf", "/etc/npmrc", "/etc/shadow", "/etc/gshadow",
    "/etc/sudoers", "/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_ed25519_key",
    "/etc/mysql/debian.cnf", "/etc/mysql/my.cnf", "/etc/docker/daemon.json",
    "/etc/ssl/private", "/etc/gitconfig", "/etc/hostname", "/etc/machine-id",
)  # fmt: skip


def _probe_result(out: str) -> dict:
    found = re.search(r"^PROBE=(.*)$", out, re.M)
    assert found, out[-2000:]
    return json.loads(found.group(1))


def _check_probe(got: dict) -> None:
    families = {fam for fam, _ in got["opened"]}
    assert families <= ALLOWED, f"families beyond the allow-list open: {got['opened']}"
    assert {1, 2} <= families  # AF_UNIX, AF_INET
    # every refused family is refused by the filter, not by chance of this kernel's build
    for fam, why in got["refused"].items():
        if int(fam) not in ALLOWED:
            assert why in ("EAFNOSUPPORT", "EPERM"), (fam, why)
    assert set(got["pairs"]) <= ALLOWED and 1 in got["pairs"]
    assert set(got["high"]) == {"16", "40"} and "open" not in got["high"].values(), got["high"]
    assert got["io_uring"] != "open"


def _wrap(script: str) -> str:
    """A shell command running ``script`` with the sandbox's python3."""
    data = base64.b64encode(script.encode()).decode()
    return f"echo {data} | base64 -d > /tmp/probe.py && python3 /tmp/probe.py"


@pytest.fixture(
    params=[
        pytest.param("local", marks=pytest.mark.bwrap),
        pytest.param("docker", marks=pytest.mark.docker),
    ]
)
def box(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    (require_bwrap if request.param == "local" else require_docker)()
    sandbox = make_sandbox(request.param)
    try:
        yield sandbox
    finally:
        sandbox.close()


# ------------------------------------------------------------------------ socket families
def test_only_allowed_socket_families_open(box: Sandbox) -> None:
    r = box.run(["python3", "-c", PROBE])
    assert r.returncode == 0, r.stderr
    _check_probe(_probe_result(r.stdout))
    # the per-case fast path (a warm worker forking) runs under the same filter
    case = next(iter(box.run_python_cases(PROBE, [PyCase("stdin")])))
    _check_probe(_probe_result(case.stdout))


def test_allowed_families_carry_traffic(box: Sandbox) -> None:
    r = box.run(["python3", "-c", ECHO])
    assert (r.returncode, r.stdout) == (0, "tcp udp unix\n"), r.stderr


def test_other_abis_are_refused(box: Sandbox) -> None:
    if platform.machine() != "x86_64":
        pytest.skip("the call is x86_64 machine code")
    r = box.run(["python3", "-c", I386_CALL])
    assert r.returncode != 0 and "i386 getpid" not in r.stdout, (r.returncode, r.stdout)


def test_docker_profile_is_an_allow_list() -> None:
    for caps in ((), ("CHOWN", "SETUID", "SETGID")):
        prof = profile(caps)
        rules = prof["syscalls"]
        names = {n for rule in rules for n in rule["names"]}
        assert not {"io_uring_setup", "io_uring_enter", "socketcall"} & names
        assert prof["defaultAction"] == "SCMP_ACT_ERRNO"
        assert all(not a["subArchitectures"] for a in prof["archMap"])
        for rule in rules:
            if {"socket", "socketpair"} & set(rule["names"]):
                assert rule["action"] == "SCMP_ACT_ALLOW"
                assert [(a["index"], a["op"]) for a in rule["args"]] == [(0, "SCMP_CMP_EQ")]
                assert rule["args"][0]["value"] in ALLOWED
        # a capability these containers lack opens nothing it gates
        assert not {"ptrace", "mount", "unshare", "bpf", "kcmp"} & {
            n for rule in rules if not rule.get("args") and not rule.get("includes")
            for n in rule["names"]
        }  # fmt: skip


# --------------------------------------------------------------------- the host's /etc
@pytest.fixture
def local_box() -> Iterator[Sandbox]:
    require_bwrap()
    sandbox = make_sandbox("local")
    try:
        yield sandbox
    finally:
        sandbox.close()


def test_local_sees_only_the_etc_programs_read(local_box: Sandbox) -> None:
    shown = {p.split("/")[0] for p in ETC_SHOWN}
    r = local_box.run(["ls", "-A", "/etc"])
    assert r.returncode == 0, r.stderr
    names = set(r.stdout.split())
    extra = {n for n in names if not any(re.fullmatch(s.replace("*", ".*"), n) for s in shown)}
    assert not extra, f"shown beyond the allow-list: {sorted(extra)}"
    checks = " ".join(f"[ -r {p} ] && echo READABLE {p};" for p in SECRETS)
    r = local_box.run(checks + " ls /etc/ssh /etc/mysql /etc/docker /etc/xdg 2>/dev/null; true")
    assert r.stdout == "", r.stdout


def test_honest_programs_still_work(local_box: Sandbox) -> None:
    tls = "import ssl; print(ssl.create_default_context().cert_store_stats()['x509_ca'])"
    r = local_box.run(["python3", "-c", tls])
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == ssl.create_default_context().cert_store_stats()["x509_ca"]
    r = local_box.run(
        "getent passwd root | cut -d: -f1; getent hosts localhost | head -1 | cut -d' ' -f1; "
        "id -un; ls -l /usr/bin/env | awk '{print $3}'; "
        "printf 'b\\na\\nb\\n' | sort | uniq -c | awk '{print $2 $1}' | tr a-z A-Z | paste -sd,"
    )
    assert r.returncode == 0, r.stderr
    # the host's root is unmapped: its files show the overflow uid, by name
    assert r.stdout.split() == ["root", "127.0.0.1", "nobody", "nobody", "A1,B2"]


#: a fresh interpreter hides a host file under /etc that the sandbox does not show (task
#: files may lie anywhere): its mask needs a mount point in the sandbox's /etc
HIDE_UNDER_ETC = r"""
import sys
from agentenvs.sandbox import make_sandbox
from agentenvs.sandbox.local import hide_from_sandboxes
hide_from_sandboxes(sys.argv[1])
with make_sandbox("local") as box:
    r = box.run(["cat", sys.argv[1]])
    print(r.returncode, repr(r.stdout), r.stderr)
"""


def test_a_mask_under_etc_still_starts(tmp_path: Path) -> None:
    import subprocess
    import sys

    require_bwrap()
    # two levels down: a top-level entry of a shown system dir is never masked
    names = ("security/limits.conf", "pam.d/other", "default/useradd", "apt/sources.list")
    hidden = next((f"/etc/{n}" for n in names if Path(f"/etc/{n}").is_file()), None)
    if hidden is None:
        pytest.skip("no file under this host's /etc to hide")
    r = subprocess.run(
        [sys.executable, "-c", HIDE_UNDER_ETC, hidden], capture_output=True, text=True, timeout=120
    )
    # the sandbox started, and the file reads as nothing (a mask is /dev/null on a nodev mount)
    assert r.returncode == 0 and r.stdout.split(" ")[1] == "''", (r.stdout, r.stderr[-2000:])


# ------------------------------------------------------------- through a terminal env
@pytest.mark.parametrize(
    "runtime",
    [pytest.param("local", marks=pytest.mark.bwrap), pytest.param("docker", marks=pytest.mark.docker)],
)  # fmt: skip
def test_terminal_step_opens_only_allowed_families(runtime: str) -> None:
    from agentenvs.envs.terminal.env import TerminalBenchEnv

    (require_bwrap if runtime == "local" else require_docker)()
    env = TerminalBenchEnv(tasks_path=FIXTURES, runtime=runtime, command_timeout=60, max_turns=4)
    try:
        env.reset(options={"task_id": "tb1-greeting"})
        obs, *_ = env.step(_wrap(PROBE))
        _check_probe(_probe_result(obs))
        if runtime == "local":
            obs, *_ = env.step("cat /etc/pip.conf /etc/shadow 2>&1 | head -c 300; ls /etc/ssh")
            assert "No such file" in obs and "index-url" not in obs and "root:" not in obs
    finally:
        env.close()
