"""What cgroup v1 charges and holds on this machine, for the grader's table of limits (README).

Run as root where the v1 ``memory`` and ``pids`` hierarchies are mounted (the grading machines, CI):

    .venv/bin/python tools/measure_cgroup_v1.py

Each kind of holding runs in a child process in a run's groups (:class:`bertfamily.grading.cgroupv1.V1Group`,
256 MiB, 64 tasks) and the script prints what the kernel did: killed it (OOM), refused a task, or
charged it (the group's usage before and after).
"""

from __future__ import annotations

import os
import socket
import sys
import threading

from bertfamily.grading import cgroupv1

LIMIT, TASKS = 256 * 2**20, 64


def anonymous():
    block = bytearray(400 * 2**20)
    for i in range(0, len(block), 4096):
        block[i] = 1


def shared(path="/dev/shm/bertfamily-measure"):
    try:
        with open(path, "wb") as handle:
            for _ in range(400):
                handle.write(b"x" * 2**20)
    finally:
        os.unlink(path)


def sockets(pairs=2000):
    held = []
    for _ in range(pairs):
        a, b = socket.socketpair()
        a.setblocking(False)
        try:
            while True:
                a.send(b"x" * 65536)
        except BlockingIOError:
            pass
        held.append((a, b))
    return held


def threads(count=200):
    stop, started = threading.Event(), 0
    try:
        for _ in range(count):
            threading.Thread(target=stop.wait, daemon=True).start()
            started += 1
    finally:
        print(f"  started {started} of {count} threads", flush=True)
        stop.set()


def charged(pairs=1000):
    """Unix socket buffers under a large limit: how much the group is charged for them."""
    group = cgroupv1.v1_run_group(4 * 2**30, TASKS)
    pid = os.fork()
    if pid == 0:
        group.join()
        before, kmem = group.usage(), cgroupv1._number(group.memory / "memory.kmem.usage_in_bytes")
        held = sockets(pairs)
        grown = cgroupv1._number(group.memory / "memory.kmem.usage_in_bytes") - kmem
        print(
            f"  {len(held)} filled Unix socketpairs: the group's usage grew by {(group.usage() - before) >> 20} "
            f"MiB, its kernel memory (memory.kmem.usage_in_bytes) by {grown >> 20} MiB",
            flush=True,
        )
        os._exit(0)
    os.waitpid(pid, 0)
    group.close()


def main() -> int:
    if cgroupv1.parents() is None:
        print("no writable cgroup v1 memory and pids hierarchies here (not root, or cgroup v2 only)")
        return 1
    print(
        f"Linux {os.uname().release}; each child in a group of memory.limit_in_bytes {LIMIT >> 20} MiB, "
        f"pids.max {TASKS}"
    )
    for name, work in (
        ("400 MiB of anonymous memory", anonymous),
        ("400 MiB written to /dev/shm", shared),
        ("2000 Unix socketpairs filled", sockets),
        ("200 threads", threads),
    ):
        group = cgroupv1.v1_run_group(LIMIT, TASKS)
        pid = os.fork()
        if pid == 0:
            group.join()
            try:
                work()
            except BaseException as exc:  # noqa: BLE001 - what the kernel refused, printed
                print(f"  refused: {type(exc).__name__}: {exc}", flush=True)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9
        print(
            f"{name}: {'killed by the OOM killer' if group.out_of_memory() else 'not killed'}"
            f"{' (SIGKILL)' if killed else ''}; peak {group.peak() >> 20} MiB; a task refused by pids.max: "
            f"{group.tasks_refused()}",
            flush=True,
        )
        group.close()
    print("Unix socket buffers under a 4 GiB limit:")
    charged()
    return 0


if __name__ == "__main__":
    sys.exit(main())
