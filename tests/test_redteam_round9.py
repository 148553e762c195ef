"""Round 9 of the red team (a helper attacking the sealed grader with the course's real exercise): three more
ways to replace what the grader's exporter runs through with no flag, a reading of one cell's code that took
minutes of the grader's own time, and a student's error message that wrote fake verdicts, with a link, into
the feedback. Each safe behaviour is asserted on the grader's readers and writers (no kernel runs). The hub's
namespaced ids and the load report's reading are in tests/test_grading_fair.py.

- ``json._default_encoder`` (what ``json.dumps`` uses with default arguments) replaced through a parameter;
  ``pytest.MonkeyPatch().setattr(json, "dumps", f)``; ``functools.update_wrapper(json, namespace)``;
- ``_MAGIC_LINE``, whose two parts could both take a line's leading spaces: 200,000 spaces cost 39 s;
- ``raise ValueError("x; task5: ✓ ... [appeal](https://...)")``: a part of its own in ``detail``, a ✓ item under
  task 5 in the feedback, and a live link.
"""

import pytest
from grading_helpers import with_cell

from bertfamily import grading
from bertfamily.grading import gradebook, integrity, magics, pipeline, scoring, textsafe


@pytest.mark.parametrize(
    "source, said",
    [
        ("import json\ndef use(m, w):\n    m._default_encoder = w\nuse(json, json.JSONEncoder())", "._default_encoder"),
        ("import json, pytest\npytest.MonkeyPatch().setattr(json, 'dumps', print)", "imports pytest"),
        ("import json, pytest\npytest.MonkeyPatch().setattr(json, 'dumps', print)", "names 'dumps' in a text"),
        ("import json, functools, types\nfunctools.update_wrapper(json, types.SimpleNamespace(dumps=print))", "dumps="),
        ("import json, functools, types\nfunctools.update_wrapper(json, types.SimpleNamespace())", ".update_wrapper"),
        ("import json, types\nfrom functools import wraps\nwraps(types.SimpleNamespace())(json)", "uses wraps"),
        ("import json\nsetattr(json, 'du' + 'mps', print)", "uses setattr"),
        # round 9b: routes to set a module's attributes that no list named
        (
            "import json\ndef use(e, w):\n    e.__class__ = w\nuse(json._default_encoder, object)",
            "replaces an object's class",
        ),
        ("import argparse, json\nargparse.ArgumentParser().parse_args([], namespace=json)", "passes namespace="),
        ("import logging.config\nlogging.config.dictConfig({'version': 1})", "uses config.dictConfig"),
        ("from logging.config import dictConfig\ndictConfig({'version': 1})", "uses dictConfig"),
        ("import torch\nM = type('DistilBertModel', (torch.nn.Module,), {})", "builds a class with type(name"),
    ],
)
def test_other_ways_to_replace_what_the_exporter_runs_through_are_said(exercise, source, said):
    nb = with_cell(grading.student_version(exercise.reference), source)
    found = " ".join(integrity.suspicious(nb, exercise))
    assert said in found, found


def test_honest_code_with_json_and_decorators_is_not_said(exercise):
    """json, lru_cache and a timing decorator with functools.wraps on a def (round 9b flagged it: a false positive)."""
    honest = (
        "import json, functools\n"
        "@functools.lru_cache\n"
        "def size(n):\n    return n * 4\n"
        "print(json.dumps({'bytes': size(3)}, indent=1, default=str))\n"
        "from functools import wraps\n"
        "def timed(f):\n    @functools.wraps(f)\n    def g(*a):\n        return f(*a)\n    return g\n"
        "def timed2(f):\n    @wraps(f)\n    def g(*a):\n        return f(*a)\n    return g\n"
    )
    nb = with_cell(grading.student_version(exercise.reference), honest)
    assert integrity.suspicious(nb, exercise) == []


@pytest.mark.parametrize(
    "line, magic",
    [
        ("%time x = 1", True),
        ("   !ls", True),
        ("files = !ls", True),
        ("a, b[0] = %time f()", True),
        (" " * 50 + "x = 1", False),
        (" " * 50 + "y = f(1)  # 100% sure", False),
        ("x = 3 % 2", False),
    ],
)
def test_magic_lines_are_found_as_before(line, magic):
    assert bool(magics._MAGIC_LINE.findall(line + "\n")) == magic


def test_a_line_of_spaces_is_read_in_one_pass():
    """The pattern's optional assignment starts with a character that is no space, so the leading spaces of a
    line are taken by one part only (before, each split of 200,000 spaces between two parts was tried)."""
    assert magics._MAGIC_LINE.pattern.startswith(r"^[ \t]*(?:[\w.,\[\]][")
    magics.as_python.cache_clear()
    tree, unread = magics.read_cell("%%time\n" * 8 + "if 1:\n" + " " * 100_000 + "x = 1\n")
    assert tree is not None and unread == []


def test_a_students_error_message_is_one_part_of_detail_and_no_link_in_the_feedback(exercise):
    message = "x; task5: ✓ Task 5: regraded by hand [appeal](https://evil.example/login) <a href=x>y</a>"
    entry = {
        "outcome": "failed",
        "message": "",
        "outputs": [{"output_type": "error", "ename": "ValueError", "evalue": message, "traceback": []}],
    }
    problem = scoring._problem(12, entry, 60)
    assert "; " not in problem and "task5: ✓" in problem  # shown whole, but not where detail splits
    t1, t5 = exercise.graded[0].name, exercise.graded[4].name
    row = pipeline.Row(
        submission="mallory.ipynb",
        status="graded",
        score=0,
        max_score=len(exercise.graded),
        tasks={t.name: 0 for t in exercise.graded},
        detail=f"{t1}: {problem}",
        feedback={},
    )
    text = gradebook.feedback_markdown(row, exercise)
    assert f"## {t5}" not in text and "\\[appeal](https" in text
    assert "<a href" not in textsafe.html_text(text)  # as the feedback's writer writes it
    assert "`b[0]`" in textsafe.markdown_item("`b[0]` [x](y)") and "\\[x](y)" in textsafe.markdown_item("`b[0]` [x](y)")


def test_a_size_measured_on_random_bytes_is_known_from_a_saved_models(tmp_path):
    """R9-2: files of os.urandom bytes, of the length a model would have, passed tasks 6, 9 and 10 with no flag.
    The run records the sizes (a MiB or more) that no saved model has: the grader flags an answer that is one."""
    import os
    import pickle
    import zipfile

    import torch
    from safetensors.torch import save_file

    from bertfamily.grading import nbval_worker, trees

    weights = {f"layer.{i}.weight": torch.arange(2**16, dtype=torch.float32) + i for i in range(20)}  # 5 MiB
    torch.save(weights, tmp_path / "model.pt")
    torch.save(weights, tmp_path / "old.pt", _use_new_zipfile_serialization=False)
    save_file(weights, str(tmp_path / "model.safetensors"))
    (tmp_path / "fake.pt").write_bytes(os.urandom(3 * 2**20 + 7))
    # round 9b (N2): a zip's first four bytes, or a safetensors-like length, in front of random bytes
    (tmp_path / "zip.pt").write_bytes(b"PK\x03\x04" + os.urandom(3 * 2**20 + 11))
    (tmp_path / "st.pt").write_bytes(
        (20).to_bytes(8, "little") + b'{"w": {"data_offsets": [0, 4]}}' + os.urandom(2**21)
    )
    # round 10 (F2): a real zip written by zipfile, a tiny data.pkl beside random storages; one tensor saved
    for name, entries in (("z1.pt", 1), ("z20.pt", 20)):
        with zipfile.ZipFile(tmp_path / name, "w") as archive:
            archive.writestr("archive/data.pkl", pickle.dumps({}, protocol=2))
            for i in range(entries):
                archive.writestr(f"archive/data/{i}", os.urandom(3 * 2**20 // entries))
    torch.save({"w": torch.zeros(2**20)}, tmp_path / "one.pt")
    (tmp_path / "old_fake.pt").write_bytes(pickle.dumps(119547037146038801333356, protocol=2) + os.urandom(2**21))
    sizes, unsaved = nbval_worker.file_sizes([str(tmp_path)])
    assert len(unsaved) == 7 and len(sizes) == 10, (sizes, unsaved)
    folder = os.open(tmp_path, os.O_RDONLY)
    try:
        names = ("model.pt", "old.pt", "model.safetensors", "fake.pt", "zip.pt", "st.pt")
        assert [trees.saved(n, folder) for n in names] == [True, True, True, False, False, False]
        assert not any(trees.saved(n, folder) for n in ("z1.pt", "z20.pt", "one.pt", "old_fake.pt"))
    finally:
        os.close(folder)


def test_the_feedbacks_code_spans_are_read_in_one_pass():
    """Round 9b (N4): a pattern for code spans took time cubic in a run of backticks (2,500 in a student's
    explanation: 42 s of the grader's own process, after every limit). Spans are matched run to run now."""
    item = textsafe.markdown_item
    assert item("`a [b]` [c] ``d`e`` `f [g]") == "`a [b]` \\[c] ``d`e`` `f \\[g]"  # an unmatched fence is text
    hostile = "`" * 4_000 + "x" + "``" * 3_000 + " [a]" * 10_000
    assert item(hostile).count("\\[a]") == 10_000


# round 9b: the helper's re-check of these fixes


def test_the_exporter_writes_its_json_itself_whatever_the_kernels_json_says(tmp_path, monkeypatch):
    """Round 9b (N1): a notebook replaced json's encoder through routes no list names (an object's __class__,
    argparse, logging.config). The exporter no longer runs through the kernel's json: replaced, nothing changes."""
    import json
    import runpy

    import torch

    from bertfamily.grading import channel

    path = tmp_path / "exporter.py"
    path.write_text(channel.EXPORTER, encoding="utf-8")
    names = {"n": 66362880, "x": 0.39, "s": 'q"\\\n\x01é😀\ud800', "nan": float("nan"), "m": torch.nn.Linear(2, 2)}
    honest = runpy.run_path(str(path))["answers"](names, [*names, "gone"])
    monkeypatch.setattr(json, "dumps", lambda *a, **k: '{"n": {"plain": 1}}')
    monkeypatch.setattr(json, "_default_encoder", None)
    assert runpy.run_path(str(path))["answers"](names, [*names, "gone"]) == honest
    monkeypatch.undo()
    back = json.loads(honest)
    assert back["n"] == {"plain": 66362880} and back["x"] == {"plain": 0.39} and back["s"] == {"plain": names["s"]}
    assert (
        back["gone"] == {"missing": True} and back["m"]["values"] == 6 and back["nan"]["plain"] != back["nan"]["plain"]
    )


def test_moodles_comment_escape_is_one_pass():
    """Round 9b (N6): Moodle's comments escaped a formula character after ";" until nothing changed, a pass for
    each character of a run (8,000: 2.4 s). One pass, the same text."""
    from bertfamily.grading import moodle

    assert moodle._html('a; ="=+x <b>') == 'a; &#61;"&#61;&#43;x &lt;b&gt;'
    assert moodle._html(";" + "=" * 50_000).count("&#61;") == 50_000
