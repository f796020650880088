#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""seccomp_exec.py SYSCALL[,SYSCALL...] PROGRAM [ARGS...]

Runs PROGRAM under a seccomp filter that makes the named syscalls fail with
EPERM, as the default profiles of podman and CRI-O do for bpf and
perf_event_open when the container lacks CAP_SYS_ADMIN. Everything else is
allowed. x86-64 only (like podprof)."""
import ctypes
import os
import struct
import sys

NR = {"bpf": 321, "perf_event_open": 298, "ptrace": 101}
AUDIT_ARCH_X86_64 = 0xC000003E
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
RET_KILL = 0x00000000
EPERM = 1


def ins(code, jt, jf, k):
    return struct.pack("=HBBI", code, jt, jf, k)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    nrs = [NR[n] for n in sys.argv[1].split(",")]
    LD_ABS_W, JEQ_K, RET_K = 0x20, 0x15, 0x06
    prog = [ins(LD_ABS_W, 0, 0, 4),  # seccomp_data.arch
            ins(JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
            ins(RET_K, 0, 0, RET_KILL),
            ins(LD_ABS_W, 0, 0, 0)]  # seccomp_data.nr
    for i, nr in enumerate(nrs):
        # equal: jump to the EPERM return after the remaining tests and the allow
        prog.append(ins(JEQ_K, len(nrs) - i, 0, nr))
    prog.append(ins(RET_K, 0, 0, RET_ALLOW))
    prog.append(ins(RET_K, 0, 0, RET_ERRNO | EPERM))
    code = b"".join(prog)
    buf = ctypes.create_string_buffer(code, len(code))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog), ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong,
                           ctypes.c_ulong]
    # Runtimes set no_new_privs unless privilege escalation is allowed; the
    # manifests set allowPrivilegeEscalation: false, so do the same.
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0:
        sys.exit("prctl(NO_NEW_PRIVS): %s" % os.strerror(ctypes.get_errno()))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        sys.exit("prctl(SECCOMP): %s" % os.strerror(ctypes.get_errno()))
    os.execvp(sys.argv[2], sys.argv[2:])


if __name__ == "__main__":
    main()
