"""Colab's own module in a graded run: ``google.colab``, standing in for what only Colab can do.

A student who worked on Colab often opens a task's cell with ``from google.colab import drive`` and
``drive.mount("/content/drive")`` before loading a model (lecturer round 10: on Colab every check passed;
in the sandbox, where no ``google.colab`` is installed, the cell raised ``No module named 'google'`` and
every task after it lost its marks: 2 of 12 for an honest notebook). Each run's kernel gets this small
package on its ``PYTHONPATH`` (read-only, :func:`write_standins`), in which what needs Colab does nothing and
says what Colab says:

* ``drive.mount(mountpoint)`` prints ``Mounted at MOUNTPOINT``, as Colab does (the cell's stored output is
  reproduced), and mounts nothing: an empty ``MOUNTPOINT/MyDrive`` is made (in the sandbox, under Colab's
  ``/content``, :data:`~bertfamily.grading.mounts.WORK_FOLDERS`), so a file written there is written, while a file
  read from Drive is still missing, as on any machine but Colab;
* ``files.download(name)`` does nothing for a file that exists (Colab sends it to the browser) and raises
  Colab's ``FileNotFoundError`` for one that does not; ``files.upload()`` uploads nothing (``{}``);
* ``output.enable_custom_widget_manager()`` and the other display switches do nothing;
* ``userdata.get(key)`` (Colab's secrets, where a student keeps ``HF_TOKEN``) returns :data:`NO_SECRET`, a
  placeholder: the student's secret is not where the grader runs, and nothing needs it there (the run has no
  network; the served hub, :mod:`~bertfamily.grading.hub`, reads no token), so code that passes it on
  (``from_pretrained(name, token=...)``, ``os.environ["HF_TOKEN"] = ...``) runs as it did on Colab.

The kernel itself starts through :data:`KERNEL` (``python -m bertfamily_ipykernel``), which puts in place what
a module cannot stand in for, then starts ipykernel as ``python -m ipykernel_launcher`` would:

* ``huggingface_hub.login(token=...)`` (a Colab student's ``login(userdata.get("HF_TOKEN"))``) asks the hub who the
  token belongs to, over the network the run does not have: the call raised ``OfflineModeIsEnabled`` and the cell's
  task, and every task after it, lost its marks. Here it signs in to nothing and returns, as a valid token does:
  the models the run serves by hub name need no token.

``google`` is a namespace package here (no ``__init__.py``), so that another ``google.*`` installed where the
grader runs (``google.protobuf``) is still imported from where it is installed.
"""

from __future__ import annotations

from pathlib import Path

STANDINS = "standins"  # the run's folder of stand-ins, under the run's folder and, read-only, in the sandbox
NO_SECRET = "bertfamily-grader-has-no-colab-secrets"  # what userdata.get returns in a graded run

_MODULES = {
    "__init__.py": '"""The grader\'s stand-in for Colab\'s module (bertfamily.grading.standins)."""\n\n'
    "from google.colab import drive, files, output, userdata  # noqa: F401\n",
    "drive.py": '"""Google Drive: nothing is mounted where the grader runs; what Colab prints is printed."""\n\n\n'
    'def mount(mountpoint="/content/drive", force_remount=False, timeout_ms=120000, readonly=False):\n'
    "    import os\n\n"
    "    try:  # an empty Drive where Colab's folder is (the sandbox's /content): written there is written, counted\n"
    '        if os.path.isdir("/sandbox/work") and os.path.isdir(os.path.dirname(os.path.abspath(mountpoint))):\n'
    '            os.makedirs(os.path.join(mountpoint, "MyDrive"), exist_ok=True)\n'
    "    except OSError:\n"
    "        pass\n"
    '    print(f"Mounted at {mountpoint}")\n\n\n'
    "def flush_and_unmount(timeout_ms=86400000):\n"
    "    pass\n",
    "files.py": '"""Files sent to or from the browser: none where the grader runs."""\n\n'
    "import os\n\n\n"
    "def download(filename):\n"
    "    if not os.path.exists(filename):\n"
    '        raise FileNotFoundError(f"Cannot find file: {filename}")\n\n\n'
    'def upload(target_dir=""):\n'
    "    return {}\n\n\n"
    "def view(filepath):\n"
    "    pass\n",
    "output.py": '"""Colab\'s output area: its switches do nothing where the grader runs."""\n\n\n'
    "def enable_custom_widget_manager():\n"
    "    pass\n\n\n"
    "def disable_custom_widget_manager():\n"
    "    pass\n\n\n"
    "def clear(wait=False, output_tags=()):\n"
    "    pass\n\n\n"
    "def eval_js(script, ignore_result=False, timeout_sec=None):\n"
    "    return None\n",
    "userdata.py": '"""Colab\'s secrets: none where the grader runs (no network to use one on)."""\n\n\n'
    "class SecretNotFoundError(Exception):\n"
    "    pass\n\n\n"
    "class NotebookAccessError(Exception):\n"
    "    pass\n\n\n"
    "def get(key):\n"
    f"    return {NO_SECRET!r}\n",
}


#: The module a graded kernel starts as (python -m KERNEL -f CONNECTION_FILE); the grader knows its kernel by
#: "ipykernel" in a command line (monitor._is_kernel, nbval_worker.inside).
KERNEL = "bertfamily_ipykernel"
_KERNEL_SOURCE = '''"""A graded kernel (bertfamily.grading.standins): signing in to the model hub, which needs the
network, does nothing; then ipykernel starts as `python -m ipykernel_launcher` starts it."""

import importlib.abc
import importlib.machinery
import runpy
import sys


def _signed_in(*args, **kwargs):
    """The hub's sign-in: nothing to sign in to where the grader runs (no network; no token needed)."""
    return None


class _SignIn(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "huggingface_hub._login":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            for checked in ("_validate_and_save_token", "_login"):  # huggingface_hub 1.x and later, 0.x
                if hasattr(module, checked):
                    setattr(module, checked, _signed_in)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _SignIn())
runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
'''


def write_standins(folder: Path) -> Path:
    """Write the stand-in ``google.colab`` and the kernel's start (:data:`KERNEL`) into ``folder`` (made here);
    return ``folder``, the path entry."""
    package = Path(folder) / "google" / "colab"
    package.mkdir(parents=True)
    for name, source in _MODULES.items():
        (package / name).write_text(source, encoding="utf-8")
    (Path(folder) / f"{KERNEL}.py").write_text(_KERNEL_SOURCE, encoding="utf-8")
    return Path(folder)
