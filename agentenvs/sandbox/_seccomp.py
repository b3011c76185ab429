"""A seccomp filter for the local sandbox: system calls no test program needs fail with EPERM.

bubblewrap installs it (``--seccomp FD``) on everything it starts. It closes kernel
surface that namespaces leave open: tracing and reading other processes
(``ptrace``, ``process_vm_readv``), mounts and namespace changes, the kernel keyring,
``bpf``, ``perf_event_open``, ``userfaultfd``, ``io_uring``, module loading, ``kexec``,
handle-based opens and the like. Other ABIs on the same machine (x32, i386) are refused
whole. The filter is built here as raw classic BPF (no libseccomp needed), for x86_64 and
aarch64; on other architectures there is none (``program()`` returns None).

``socket`` and ``socketpair`` are allowed for the families in :data:`SOCKET_FAMILIES` alone
(an allow-list: a family the kernel adds later stays closed); any other fails with
EAFNOSUPPORT, as on a kernel built without it. AF_UNIX is what local programs talk over;
AF_INET/AF_INET6 reach only the sandbox's own loopback. Every other family is kernel
surface no test program needs: AF_NETLINK too (glibc's ``getaddrinfo`` asks it which
address families are configured, and on refusal assumes both: names still resolve; only
``ip``/``ss`` and interface listings fail, and the sandbox has no interfaces worth listing),
AF_PACKET, AF_VSOCK (the host's hypervisor), AF_ALG, AF_KEY, AF_XDP, Bluetooth and the rest.
The family is the call's first argument as an ``int``: its low 32 bits are checked, as the
kernel reads them. ``io_uring`` (which can open sockets past this filter) is refused whole.
"""

from __future__ import annotations

import errno
import platform
import struct

# offsets in struct seccomp_data
_NR = 0
_ARCH = 4
# classic BPF opcodes
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
#: offset of the low 32 bits of args[0] in struct seccomp_data (little-endian machines)
_ARG0_LO = 16
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

#: syscall name -> number, per architecture
# system calls added since Linux 5.1 have one number on every architecture
_UNIFIED = {
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
}
_DENIED: dict[str, dict[str, int]] = {
    "x86_64": {
        "ptrace": 101,
        "syslog": 103,
        "uselib": 134,
        "pivot_root": 155,
        "acct": 163,
        "mount": 165,
        "umount2": 166,
        "swapon": 167,
        "swapoff": 168,
        "reboot": 169,
        "iopl": 172,
        "ioperm": 173,
        "init_module": 175,
        "delete_module": 176,
        "quotactl": 179,
        "lookup_dcookie": 212,
        "kexec_load": 246,
        "add_key": 248,
        "request_key": 249,
        "keyctl": 250,
        "migrate_pages": 256,
        "unshare": 272,
        "move_pages": 279,
        "perf_event_open": 298,
        "fanotify_init": 300,
        "name_to_handle_at": 303,
        "open_by_handle_at": 304,
        "setns": 308,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "kcmp": 312,
        "finit_module": 313,
        "kexec_file_load": 320,
        "bpf": 321,
        "userfaultfd": 323,
        **_UNIFIED,
    },
    "aarch64": {
        "ptrace": 117,
        "syslog": 116,
        "pivot_root": 41,
        "acct": 89,
        "mount": 40,
        "umount2": 39,
        "swapon": 224,
        "swapoff": 225,
        "reboot": 142,
        "init_module": 105,
        "delete_module": 106,
        "quotactl": 60,
        "lookup_dcookie": 18,
        "kexec_load": 104,
        "add_key": 217,
        "request_key": 218,
        "keyctl": 219,
        "migrate_pages": 238,
        "unshare": 97,
        "move_pages": 239,
        "perf_event_open": 241,
        "fanotify_init": 262,
        "name_to_handle_at": 264,
        "open_by_handle_at": 265,
        "setns": 268,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "kcmp": 272,
        "finit_module": 273,
        "kexec_file_load": 294,
        "bpf": 280,
        "userfaultfd": 282,
        **_UNIFIED,
    },
}
_X32_BIT = 0x40000000

#: the socket families a sandboxed program may open: AF_UNIX, AF_INET, AF_INET6
SOCKET_FAMILIES: dict[str, int] = {"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10}
#: socket(2) and socketpair(2), per architecture: their first argument is the family
_SOCKET_CALLS = {"x86_64": (41, 53), "aarch64": (198, 199)}

DENIED_SYSCALLS: tuple[str, ...] = tuple(sorted(_DENIED["x86_64"]))


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _assemble(lines: list[tuple[str | None, int, str | int, str | int, int]]) -> bytes:
    """Classic BPF from ``(label, code, jt, jf, k)``; a jump names its target's label
    (an int is a relative offset, 0 the next instruction)."""
    where = {label: i for i, (label, *_) in enumerate(lines) if label}

    def rel(i: int, to: str | int) -> int:
        off = to if isinstance(to, int) else where[to] - i - 1
        if not 0 <= off <= 255:
            raise ValueError(f"BPF jump out of range: {off}")
        return off

    return b"".join(
        _insn(code, rel(i, jt), rel(i, jf), k) for i, (_, code, jt, jf, k) in enumerate(lines)
    )


def program(machine: str | None = None) -> bytes | None:
    """The filter as bytes of ``struct sock_filter`` for this machine (None: unsupported)."""
    machine = machine or platform.machine()
    if machine not in _DENIED:
        return None
    numbers = sorted(set(_DENIED[machine].values()))
    ld, jeq, jge, ret = _LD_W_ABS, _JEQ_K, _JGE_K, _RET_K
    out: list[tuple[str | None, int, str | int, str | int, int]] = [
        (None, ld, 0, 0, _ARCH),
        (None, jeq, 1, 0, _AUDIT_ARCH[machine]),
        (None, ret, 0, 0, SECCOMP_RET_KILL_PROCESS),  # another ABI: never allowed
        (None, ld, 0, 0, _NR),
    ]
    if machine == "x86_64":
        # x32 calls share the arch value and set this bit
        out.append((None, jge, "deny", 0, _X32_BIT))
    out += [(None, jeq, "deny", 0, nr) for nr in numbers]
    out += [(None, jeq, "family", 0, nr) for nr in _SOCKET_CALLS[machine]]
    out.append((None, ret, 0, 0, SECCOMP_RET_ALLOW))
    # socket/socketpair: the family must be on the allow-list
    out.append(("family", ld, 0, 0, _ARG0_LO))
    out += [(None, jeq, "allow", 0, fam) for fam in SOCKET_FAMILIES.values()]
    out.append((None, ret, 0, 0, SECCOMP_RET_ERRNO | errno.EAFNOSUPPORT))
    out.append(("allow", ret, 0, 0, SECCOMP_RET_ALLOW))
    out.append(("deny", ret, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM))
    return _assemble(out)
