"""The lecturer's round 6 (a helper grading a class of its own through Canvas and Moodle): no grade was wrong,
and these made the feedback say something other than what the student saw. No kernel runs here; the
``;`` of a re-run cell is also graded end to end in the shared class (tests/test_sandbox.py, olivia_helper).

- A notebook run out of order (task 4 calls ``to_mib``, defined in a cell further down): its saved ✓ became
  0 of 3 with only "NameError: name 'to_mib' is not defined". The problem now says where it is defined, and
  that the grader runs the notebook from the top.
- ``distilbert.eval(); bert.eval();``: Jupyter shows nothing, nbval's re-run (``store_history=False``, where
  IPython cannot see the ``;``) showed the model: "outputs differ", which ``--strict-outputs`` would score.
"""

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from bertfamily.grading.causes import defined_below, top_level_definitions
from bertfamily.grading.nbval_worker import shown

RESULT = {"output_type": "execute_result", "data": {"text/plain": "BertModel(...)"}, "execution_count": 3}
PRINTED = {"output_type": "stream", "name": "stdout", "text": "66,362,880\n"}


def test_a_name_a_later_cell_defines_is_said_with_that_cell():
    nb = new_notebook(
        cells=[
            new_code_cell("size_mib = to_mib(fp32_bytes)"),
            new_markdown_cell("## Task 6"),
            new_code_cell("def helper():\n    to_mib = None  # a local: defines nothing for the notebook"),
            new_code_cell("%%time\ndef to_mib(n):\n    return n / 2**20"),
        ]
    )
    found = top_level_definitions(nb)
    assert found["to_mib"] == [3] and found["size_mib"] == [0] and found["helper"] == [2]  # not helper's local
    error = "cell 0 (the cell that starts `size_mib`) raised NameError: name 'to_mib' is not defined"
    said = defined_below(found, 0, error)
    assert said.startswith("`to_mib` is defined further down, in cell 3") and "Restart & Run All" in said
    assert defined_below(found, 3, "cell 3 raised NameError: name 'to_mib' is not defined") is None  # nothing below
    assert defined_below(found, 0, "cell 0 raised NameError: name 'nowhere' is not defined") is None
    assert defined_below(found, 0, "cell 0 raised ValueError: to_mib") is None
    assert defined_below(found, 0, None) is None


@pytest.mark.parametrize(
    "source, kept",
    [
        ("distilbert.eval(); bert.eval();", [PRINTED]),
        ("print(f'{count:,}')\nmodel  # shown", [RESULT, PRINTED]),
        ("x = 1;\n# a comment after", [PRINTED]),
        ("for i in range(2):\n    print(i);\nmodel", [RESULT, PRINTED]),  # the last line decides
        ("def broken(:", [RESULT, PRINTED]),  # not Python: as it came
    ],
)
def test_a_cell_ending_with_a_semicolon_shows_no_result_as_in_jupyter(source, kept):
    answers = {"output_type": "execute_result", "data": {"application/vnd.bertfamily.answers+json": {}}}
    outputs = [RESULT, PRINTED]
    assert shown(outputs, source) == kept
    assert answers in shown([answers], "x;")  # the grader's own message is never dropped
