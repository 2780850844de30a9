#!/usr/bin/env python3
"""reaper.py CMD ARGS...: runs CMD as a child subreaper, reaping the orphans it
leaves (slurmd double-forks a slurmstepd per job; on machines whose PID 1 does not
reap, they would pile up as zombies). Forwards TERM/INT/HUP; exits with CMD's status."""
import ctypes, os, signal, sys

ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
pid = os.fork()
if pid == 0:
    os.setsid()
    os.execvp(sys.argv[1], sys.argv[1:])


def forward(sig, _):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, forward)
status = 0
while True:
    try:
        p, st = os.wait()
    except ChildProcessError:
        break
    if p == pid:
        status = os.waitstatus_to_exitcode(st)
sys.exit(status if status >= 0 else 128 - status)
