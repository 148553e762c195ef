"""What several grading test files build by hand: a run as the sandbox records it, with the messages the
exporter sends (test_grading_repairs.py, test_grading_hostile.py), a gradebook row
(test_grading_week.py, test_grading_hostile.py), and a handed-in file with its time (the red team's rounds)."""

import json
import os
from datetime import datetime

from bertfamily.grading.channel import ANSWERS_MIME
from bertfamily.grading.pipeline import Row


def message(cid, answers):
    """The display message the exporter sends from check cell ``cid`` (as nbval records it)."""
    return {
        "output_type": "display_data",
        "data": {"text/plain": "", ANSWERS_MIME: {"cell": cid, "answers": json.dumps(answers)}},
    }


def passed_run(prepared, exercise, answers, sizes=None):
    """A run in which every cell passed and printed what the reference stored, and the check cells in
    ``answers`` sent those answers (the kernel's checks print only that the grader checks). The run
    held files of ``sizes`` (default: of every whole number answered, as an honest run measures them)."""
    if sizes is None:
        sizes = sorted(
            {
                v["plain"]
                for a in answers.values()
                for v in a.values()
                if isinstance(v, dict) and isinstance(v.get("plain"), int)
            }
        )
    code = [c for c in prepared.nb.cells if c.cell_type == "code"]
    reference = {c.get("id"): c for c in exercise.reference.cells}
    checks = {cid for t in exercise.tasks for cid, _ in t.checks}
    results = {}
    for n, cell in enumerate(code):
        outputs = [
            {"output_type": "stream", "name": "stdout", "text": o.get("text", "")}
            for o in reference.get(cell.get("id"), cell).get("outputs", [])
            if o.get("output_type") == "stream"
        ]
        if cell.get("id") in checks:
            outputs = [message(cell.id, answers[cell.id])] if cell.id in answers else []
        results[n] = {
            "cell": n,
            "phase": "call",
            "outcome": "passed",
            "message": "",
            "outputs": outputs,
            "sizes": sizes if n == 0 else [],
        }
    return {"status": "", "reason": "", "cell": None, "results": results, "exit_code": 0, "log": "", "peak_mib": 0}


def _row(name, marks, **kw):
    return Row(name, "graded", sum(v for v in marks.values() if v is not None), len(marks), dict(marks), "", **kw)


def with_cell(nb, source, cid="attack01", after=0):
    """``nb`` with a code cell of ``source`` (id ``cid``) put after its code cell number ``after``."""
    import nbformat

    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    new = nbformat.v4.new_code_cell(source)
    new["id"] = cid
    nb.cells.insert(code[after] + 1, new)
    return nb


def touch(path, when="2026-12-05T10:00+00:00"):
    """An empty notebook file at ``path`` (its folders made), its modification time ``when`` (ISO 8601)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}", encoding="utf-8")
    stamp = datetime.fromisoformat(when).timestamp()
    os.utime(path, (stamp, stamp))
    return path
