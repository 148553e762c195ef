"""Every limit of a run held by the Linux kernel where the grader can make cgroups (cgroup v1 here and
on CI, as root; v2 where delegated), and the watcher's cost independent of what the run holds.

Each test runs small processes (no notebook kernel) in a run's group, with the group the grader
makes (:func:`bertfamily.grading.cgroups.run_group`): memory of every kind (pages, /dev/shm, Unix
socket buffers) is stopped by the kernel at the group's limit; threads count as tasks; a watcher pass
reads a few counters whatever the run holds. Measured numbers: tools/measure_cgroup_v1.py.
"""

import os
import subprocess
import sys
import time

import pytest

from bertfamily.grading import cgroups, cgroupv1, monitor
from bertfamily.grading.monitor import Limits

LIMITS = Limits(memory_mib=48, disk_mib=16, processes=24, timeout=1.5)
HELD = cgroups.run_group(LIMITS)
if HELD is not None:
    HELD.close()
pytestmark = pytest.mark.skipif(HELD is None, reason="no cgroup the grader may make here (not root, no v1/v2)")


@pytest.fixture
def group():
    made = cgroups.run_group(LIMITS)
    yield made
    made.close()


def run_in(group, code: str, timeout: float = 30, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-I", "-c", code], preexec_fn=group.join, capture_output=True, text=True, timeout=timeout, **kw
    )


def test_a_v1_group_is_made_below_the_graders_own_with_the_limits(group):
    if isinstance(group, cgroupv1.V1Group):
        assert (group.memory / "memory.limit_in_bytes").read_text().strip() == str((48 + 16) * 2**20)
        assert (group.pids / "pids.max").read_text().strip() == "24"
        assert group.memory.parent == cgroupv1.parents()["memory"]
    assert group.usage() == 0 and not group.out_of_memory() and not group.tasks_refused()


@pytest.mark.parametrize(
    "what, code",
    [
        ("pages", "b = bytearray(200 * 2**20)\nfor i in range(0, len(b), 4096): b[i] = 1"),
        (
            "Unix socket buffers",
            "import socket\nheld = []\nfor _ in range(1500):\n    a, b = socket.socketpair()\n"
            "    a.setblocking(False)\n    try:\n        while True: a.send(b'x' * 65536)\n"
            "    except BlockingIOError: pass\n    held.append((a, b))",
        ),
    ],
)
def test_memory_of_every_kind_is_stopped_by_the_kernel(group, what, code):
    done = run_in(group, code)
    assert done.returncode == -9 and group.out_of_memory(), (what, done)
    assert group.peak() <= (48 + 16) * 2**20


def test_dev_shm_in_the_sandbox_is_memory_of_the_group(group):
    """A /dev/shm of its own (a tmpfs, as the sandbox mounts it, larger than the limit): the pages of its
    files are charged to the run's group, so the group's memory limit holds them (stopping a run at the
    limit through /dev/shm takes the kernel several seconds of reclaim: measured by the tool, not here)."""
    from bertfamily.grading import mounts, sandbox

    if sandbox.sandbox_problem() or not os.path.exists("/usr/bin/python3"):
        pytest.skip(sandbox.sandbox_problem() or "no system Python (/usr/bin/python3) for the sandbox's user")
    bwrap = [
        mounts.bwrap_path(),
        *mounts.namespaces(),
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--size",
        str(512 * 2**20),
        "--tmpfs",
        "/dev/shm",
        "/usr/bin/python3",
        "-I",
        "-c",
        "import time\nf = open('/dev/shm/x', 'wb')\nfor _ in range(20): f.write(b'x' * 2**20)\nf.close()\n"
        "print('written', flush=True)\n"
        "time.sleep(30)",
    ]
    ids = mounts.outer_ids()

    def start():
        group.join()
        sandbox._drop(ids)()

    before = group.usage()
    proc = subprocess.Popen(bwrap, preexec_fn=start, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "written"
        assert group.usage() - before >= 20 * 2**20
    finally:
        group.kill()
        proc.wait()


def test_a_spike_between_two_passes_is_seen(group):
    """The watcher reads the peak since its last pass: memory held for a moment and freed still counts."""
    if not hasattr(group, "recent_peak") or not isinstance(group, cgroupv1.V1Group):
        pytest.skip("cgroup v1's peak counter")
    group.recent_peak()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-I",
            "-c",
            "import time\nb = bytearray(40 * 2**20)\n"
            "for i in range(0, len(b), 4096): b[i] = 1\ndel b\nprint('freed', flush=True)\n"
            "time.sleep(30)",
        ],
        preexec_fn=group.join,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "freed"
        assert group.usage() < 40 * 2**20 <= group.recent_peak()
        assert group.recent_peak() < 40 * 2**20  # reset: the next pass sees only what came after
    finally:
        group.kill()
        proc.wait()


def test_threads_count_as_tasks_and_the_kernel_refuses_them(group):
    code = (
        "import threading\nstop = threading.Event()\nn = 0\ntry:\n    for _ in range(200):\n"
        "        threading.Thread(target=stop.wait, daemon=True).start(); n += 1\n"
        "except RuntimeError: pass\nprint(n)\nstop.set()"
    )
    done = run_in(group, code)
    assert int(done.stdout) < 24 and group.tasks_refused(), done


def test_the_watchers_pass_costs_the_same_whatever_the_run_holds(group, tmp_path, monkeypatch):
    """20 processes holding 3,000 descriptors each: with a group, the watcher reads its counters and never
    lists descriptors; the run's time limit fires on time."""
    monkeypatch.setattr(monitor, "_holdings", lambda *a: pytest.fail("the watcher listed a process's descriptors"))
    code = (
        "import os, resource, time\nresource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))\n"
        "fd = os.open('/dev/null', os.O_RDONLY)\nfor _ in range(20):\n    if os.fork() == 0:\n"
        "        held = [os.dup(fd) for _ in range(3000)]\n        time.sleep(60)\ntime.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-I", "-c", code], preexec_fn=group.join, start_new_session=True)
    began = time.monotonic()
    status, reason, _ = monitor.watch(proc, tmp_path / "record.jsonl", LIMITS, [0], (), None, group, True)
    proc.wait()
    assert status == "timeout" and "held by the grader's watcher" in reason, reason
    assert time.monotonic() - began < LIMITS.timeout + 1.5
    if isinstance(group, cgroupv1.V1Group):  # the whole group was killed (zombies keep a PID until reaped)
        assert cgroupv1._read(group.pids / "cgroup.procs").split() == []


def test_the_watcher_and_the_kernel_give_one_reason_past_the_memory_limit(group, tmp_path):
    """Past --memory-mib but within the group's limit (memory and files), the watcher stops the run; its
    reason is the words the sandbox writes when the kernel's OOM killer gets there first (which one does
    is a race: CI once graded one notebook two ways)."""
    code = (
        "import time\nheld = []\nfor _ in range(13):\n    b = bytearray(4 * 2**20)\n"
        "    for i in range(0, len(b), 4096): b[i] = 1\n    held.append(b)\n    time.sleep(0.05)\n"
        "time.sleep(30)"
    )
    proc = subprocess.Popen([sys.executable, "-I", "-c", code], preexec_fn=group.join, start_new_session=True)
    status, reason, _ = monitor.watch(proc, tmp_path / "record.jsonl", LIMITS, [0], (), None, group, True)
    proc.wait()
    assert (status, reason) == ("error", monitor.out_of_memory(LIMITS, group))
    assert not group.out_of_memory()  # the watcher, not the kernel
    assert reason == (
        f"out of memory: the run used more than 48 MiB of memory (memory, /dev/shm and socket "
        f"buffers; with its 16 MiB of files: held by {group.kind} {group.memory_file} at 64 MiB)"
    )


def test_without_a_group_the_watcher_counts_threads_too(tmp_path):
    code = (
        "import threading, time\nstop = threading.Event()\nfor _ in range(40):\n"
        "    threading.Thread(target=stop.wait, daemon=True).start()\ntime.sleep(30)"
    )
    proc = subprocess.Popen([sys.executable, "-I", "-c", code], start_new_session=True)
    status, reason, _ = monitor.watch(proc, tmp_path / "record.jsonl", LIMITS, [0])
    proc.wait()
    assert status == "error" and "processes and threads" in reason and "sampled by the grader's watcher" in reason


def test_the_socket_folder_is_a_small_tmpfs_when_the_grader_is_root(tmp_path):
    from bertfamily.grading import sandbox

    if os.geteuid() != 0:
        pytest.skip("only a root grader mounts the socket folder")
    folder = tmp_path / "runtime"
    folder.mkdir()
    assert sandbox.cap_runtime(folder)
    try:
        with pytest.raises(OSError):  # ENOSPC (or EFBIG): never the grader's disk
            (folder / "big").write_bytes(b"x" * (sandbox.RUNTIME_TMPFS + 2**20))
        assert str(folder) in sandbox._mounts_under(str(tmp_path))
    finally:
        sandbox.uncap_runtime(folder)
    assert not sandbox._mounts_under(str(tmp_path))


def test_the_groups_of_a_grader_that_is_gone_are_swept():
    if cgroupv1.parents() is None:
        pytest.skip("cgroup v1")
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    folders = cgroupv1.parents()
    left = [folders[h] / f"bertfamily-run-{dead}-deadbeef" for h in cgroupv1.HIERARCHIES]
    for folder in left:
        folder.mkdir()
    mine = cgroupv1.v1_run_group(2**30, 10)
    try:
        assert cgroupv1.sweep() >= 2
        assert not any(folder.exists() for folder in left) and mine.memory.exists()  # a live grader's stays
    finally:
        mine.close()
