"""The seccomp profile of the ``docker`` sandbox's and the terminal tasks' containers:
Docker's default profile, with socket families on an allow-list.

Passing a profile replaces the engine's default whole, so this one is the default built
again from what Docker documents of it (moby's ``profiles/seccomp``: the system calls it
allows, its argument rules on ``personality`` and ``clone``, its groups gated by a
capability, an architecture or a kernel version), changed in four ways:

- ``socket`` and ``socketpair`` are allowed for AF_UNIX, AF_INET and AF_INET6 alone
  (:data:`SOCKET_FAMILIES`, the local sandbox's list); any other family (AF_NETLINK,
  AF_PACKET, AF_VSOCK, AF_ALG, AF_KEY, AF_XDP, ...) fails with EPERM. Each rule compares
  the whole 64-bit argument for equality, so high bits above the ``int`` the kernel reads
  cannot carry a refused family past it (a ``<``/``>`` range would let them);
- only the engine's own ABI (x86_64 or aarch64): i386's ``socketcall`` passes the family
  through a pointer no seccomp rule can read, and x32/i386/arm32 are refused whole, as in
  the local sandbox;
- no ``io_uring`` (it can open sockets past seccomp; engines before 25 allowed it);
- the groups gated by a capability are resolved here for the container's capabilities
  (the engine would do the same), so the profile says exactly what that container may do.

``security_opt(capabilities)`` gives the ``seccomp=<json>`` entry for ``security_opt``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from typing import Any

#: the socket families a contained program may open: AF_UNIX, AF_INET, AF_INET6
SOCKET_FAMILIES: dict[str, int] = {"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10}

# what every container may call (the default profile's unconditional list, less
# ``socketpair`` and i386's ``socketcall``); names a kernel or libseccomp does not know
# are skipped by the runtime
_ALLOWED = (
    # sockets (socket and socketpair: by family, below)
    "accept accept4 bind connect getpeername getsockname getsockopt listen recv recvfrom "
    "recvmmsg recvmmsg_time64 recvmsg send sendfile sendfile64 sendmmsg sendmsg sendto "
    "setsockopt shutdown "
    # files and descriptors
    "_llseek access cachestat chdir chmod chown chown32 close close_range copy_file_range "
    "creat dup dup2 dup3 faccessat faccessat2 fadvise64 fadvise64_64 fallocate fchdir "
    "fchmod fchmodat fchmodat2 fchown fchown32 fchownat fcntl fcntl64 fdatasync fgetxattr "
    "flistxattr flock fremovexattr fsetxattr fstat fstat64 fstatat64 fstatfs fstatfs64 "
    "fsync ftruncate ftruncate64 futimesat getcwd getdents getdents64 getxattr getxattrat "
    "ioctl lchown lchown32 lgetxattr link linkat listmount listxattr listxattrat llistxattr "
    "lremovexattr lseek lsetxattr lstat lstat64 mkdir mkdirat mknod mknodat "
    "name_to_handle_at newfstatat open openat openat2 pipe pipe2 pread64 preadv preadv2 "
    "pwrite64 pwritev pwritev2 read readahead readlink readlinkat readv removexattr "
    "removexattrat rename renameat renameat2 rmdir setxattr setxattrat splice stat stat64 "
    "statfs statfs64 statmount statx symlink symlinkat sync sync_file_range syncfs tee "
    "truncate truncate64 unlink unlinkat utime utimensat utimensat_time64 utimes vmsplice "
    "write writev "
    # System V and POSIX IPC
    "ipc mq_getsetattr mq_notify mq_open mq_timedreceive mq_timedreceive_time64 "
    "mq_timedsend mq_timedsend_time64 mq_unlink msgctl msgget msgrcv msgsnd semctl semget "
    "semop semtimedop semtimedop_time64 shmat shmctl shmdt shmget "
    # events and polling
    "_newselect epoll_create epoll_create1 epoll_ctl epoll_ctl_old epoll_pwait epoll_pwait2 "
    "epoll_wait epoll_wait_old eventfd eventfd2 fanotify_mark inotify_add_watch "
    "inotify_init inotify_init1 inotify_rm_watch io_cancel io_destroy io_getevents "
    "io_pgetevents io_pgetevents_time64 io_setup io_submit poll ppoll ppoll_time64 pselect6 "
    "pselect6_time64 select signalfd signalfd4 timerfd_create timerfd_gettime "
    "timerfd_gettime64 timerfd_settime timerfd_settime64 "
    # signals
    "alarm kill pause pidfd_send_signal restart_syscall rt_sigaction rt_sigpending "
    "rt_sigprocmask rt_sigqueueinfo rt_sigreturn rt_sigsuspend rt_sigtimedwait "
    "rt_sigtimedwait_time64 rt_tgsigqueueinfo sigaltstack sigprocmask sigreturn tgkill "
    "tkill "
    # memory
    "brk madvise map_shadow_stack membarrier memfd_create memfd_secret mincore mlock mlock2 "
    "mlockall mmap mmap2 mprotect mremap mseal msync munlock munlockall munmap pkey_alloc "
    "pkey_free pkey_mprotect process_mrelease remap_file_pages "
    # identity and limits
    "capget capset getegid getegid32 geteuid geteuid32 getgid getgid32 getgroups "
    "getgroups32 getpriority getresgid getresgid32 getresuid getresuid32 getrlimit "
    "getrusage getuid getuid32 ioprio_get ioprio_set landlock_add_rule "
    "landlock_create_ruleset landlock_restrict_self prctl prlimit64 seccomp setfsgid "
    "setfsgid32 setfsuid setfsuid32 setgid setgid32 setgroups setgroups32 setpriority "
    "setregid setregid32 setresgid setresgid32 setresuid setresuid32 setreuid setreuid32 "
    "setrlimit setuid setuid32 ugetrlimit umask "
    # processes and threads
    "execve execveat exit exit_group fork futex futex_requeue futex_time64 futex_wait "
    "futex_waitv futex_wake get_robust_list get_thread_area getcpu getpgid getpgrp getpid "
    "getppid getrandom getsid gettid pidfd_open riscv_hwprobe rseq sched_get_priority_max "
    "sched_get_priority_min sched_getaffinity sched_getattr sched_getparam "
    "sched_getscheduler sched_rr_get_interval sched_rr_get_interval_time64 "
    "sched_setaffinity sched_setattr sched_setparam sched_setscheduler sched_yield "
    "set_robust_list set_thread_area set_tid_address setpgid setsid sysinfo uname uretprobe "
    "vfork wait4 waitid waitpid "
    # time
    "adjtimex clock_adjtime clock_adjtime64 clock_getres clock_getres_time64 clock_gettime "
    "clock_gettime64 clock_nanosleep clock_nanosleep_time64 getitimer gettimeofday "
    "nanosleep setitimer time timer_create timer_delete timer_getoverrun timer_gettime "
    "timer_gettime64 timer_settime timer_settime64 times "
)
ALLOWED: tuple[str, ...] = tuple(_ALLOWED.split())

#: calls allowed from a kernel version on (ptrace can no longer bypass seccomp from 4.8)
_FROM_KERNEL_4_8 = ("process_vm_readv", "process_vm_writev", "ptrace")
#: calls allowed on one architecture
_BY_ARCH: dict[tuple[str, ...], tuple[str, ...]] = {
    ("amd64", "x32"): ("arch_prctl",),
    ("amd64", "x32", "x86"): ("modify_ldt",),
    ("arm", "arm64"): (
        "arm_fadvise64_64", "arm_sync_file_range", "sync_file_range2", "breakpoint",
        "cacheflush", "set_tls",
    ),
}  # fmt: skip
#: calls a capability allows (Linux's name for it)
_BY_CAPABILITY: dict[str, tuple[str, ...]] = {
    "CAP_DAC_READ_SEARCH": ("open_by_handle_at",),
    "CAP_SYS_ADMIN": (
        "bpf", "clone", "clone3", "fanotify_init", "fsconfig", "fsmount", "fsopen", "fspick",
        "lookup_dcookie", "lsm_get_self_attr", "lsm_list_modules", "lsm_set_self_attr",
        "mount", "mount_setattr", "move_mount", "open_tree", "perf_event_open", "quotactl",
        "quotactl_fd", "setdomainname", "sethostname", "setns", "syslog", "umount",
        "umount2", "unshare",
    ),
    "CAP_SYS_BOOT": ("reboot",),
    "CAP_SYS_CHROOT": ("chroot",),
    "CAP_SYS_MODULE": ("delete_module", "init_module", "finit_module"),
    "CAP_SYS_PACCT": ("acct",),
    "CAP_SYS_PTRACE": (
        "kcmp", "pidfd_getfd", "process_madvise", "process_vm_readv", "process_vm_writev",
        "ptrace",
    ),
    "CAP_SYS_RAWIO": ("iopl", "ioperm"),
    "CAP_SYS_TIME": ("settimeofday", "stime", "clock_settime", "clock_settime64"),
    "CAP_SYS_TTY_CONFIG": ("vhangup",),
    "CAP_SYS_NICE": ("get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node"),
    "CAP_SYSLOG": ("syslog",),
    "CAP_BPF": ("bpf",),
    "CAP_PERFMON": ("perf_event_open",),
}  # fmt: skip
#: personality(2) values allowed: Linux, UNAME26, ADDR_NO_RANDOMIZE and both, and a query
_PERSONALITIES = (0x0, 0x0008, 0x20000, 0x20008, 0xFFFFFFFF)
#: CLONE_NEWNS|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET|NEWCGROUP: new namespaces need CAP_SYS_ADMIN
_CLONE_NAMESPACES = 0x7E020000
_ENOSYS = 38


def _allow(names: Iterable[str], **extra: Any) -> dict[str, Any]:
    return {"names": list(names), "action": "SCMP_ACT_ALLOW", **extra}


def _arg0(value: int, op: str = "SCMP_CMP_EQ", value_two: int = 0) -> list[dict[str, Any]]:
    return [{"index": 0, "value": value, "valueTwo": value_two, "op": op}]


def profile(capabilities: Iterable[str] = ()) -> dict[str, Any]:
    """The profile, as the engine reads it, for a container holding ``capabilities``
    (``CHOWN`` or ``CAP_CHOWN``)."""
    caps = {c.upper() if c.upper().startswith("CAP_") else f"CAP_{c.upper()}" for c in capabilities}
    rules: list[dict[str, Any]] = [_allow(ALLOWED)]
    rules += [_allow(["socket", "socketpair"], args=_arg0(f)) for f in SOCKET_FAMILIES.values()]
    rules.append(_allow(_FROM_KERNEL_4_8, includes={"minKernel": "4.8"}))
    rules += [_allow(["personality"], args=_arg0(p)) for p in _PERSONALITIES]
    rules += [_allow(names, includes={"arches": list(a)}) for a, names in _BY_ARCH.items()]
    for cap, names in _BY_CAPABILITY.items():
        if cap in caps:
            rules.append(_allow(names))
    if "CAP_SYS_ADMIN" not in caps:
        # threads and processes, never new namespaces; clone3's flags lie behind a pointer:
        # ENOSYS sends the C library back to clone
        rules.append(_allow(["clone"], args=_arg0(_CLONE_NAMESPACES, "SCMP_CMP_MASKED_EQ")))
        rules.append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": _ENOSYS})
    return {
        "defaultAction": "SCMP_ACT_ERRNO",
        # the engine keeps the entry for its own machine: its native ABI alone
        "archMap": [
            {"architecture": "SCMP_ARCH_X86_64", "subArchitectures": []},
            {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": []},
        ],
        "syscalls": rules,
    }


@functools.lru_cache(maxsize=8)
def _option(caps: frozenset[str]) -> str:
    return "seccomp=" + json.dumps(profile(caps), separators=(",", ":"))


def security_opt(capabilities: Iterable[str] = ()) -> str:
    """The ``security_opt`` entry giving a container holding ``capabilities`` this profile."""
    return _option(frozenset(capabilities))
