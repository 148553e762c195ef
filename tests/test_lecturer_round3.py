"""Round 3 of a helper acting as a lecturer (a class of ten it wrote, Canvas's and Moodle's exports): what
an honest student and a lecturer lost, each fixed behaviour asserted without a kernel. The command-line
cases (a regrade with a later deadline, extensions, a class the grader failed on, Moodle's Status) are in
tests/test_grading_week.py beside the stand-in grader they use.

- a BERT built without its pooler (``add_pooling_layer=False``, the encoder of a masked-LM model) got ✓ for
  task 1 in the notebook and 0 from the grader, which called it "not a real model";
- a renamed variable hid a copy; an error in a cell whose first line holds "; " cut the feedback apart;
- every student who plotted got an "outputs differ" line (the sealed run draws with Agg).
"""
import nbformat
import pytest
import torch
from transformers import BertModel

from bertfamily import budget, mistakes
from bertfamily.grading import copies, verify
from bertfamily.grading.nbval_worker import place_independent
from bertfamily.grading.scoring import _where
from bertfamily.models import published_config

POOLER = "the encoder without its pooler"


def test_a_bert_without_its_pooler_fails_task_1_alike_in_the_notebook_and_in_the_grader():
    config = published_config("bert-base-uncased")
    with torch.device("meta"):
        bare = BertModel(config, add_pooling_layer=False)
        whole = BertModel(config)
    assert POOLER in mistakes.model_mistake(bare, "bert", "bert-base-uncased", config)
    assert mistakes.model_mistake(whole, "bert", "bert-base-uncased", config) is None
    settings = {k: v for k, v in config.to_dict().items() if v is None or isinstance(v, (bool, int, float, str))}
    summary = {"module": "BertModel", "object": 1, "config": settings, "linear": 73, "dynamic": [],
               "values": sum(p.numel() for p in bare.parameters())}
    assert summary["values"] == budget.count(config) - (768 * 768 + 768)
    assert POOLER in verify._not_its_configuration(summary)
    assert verify._not_its_configuration({**summary, "values": budget.count(config)}) is None


def test_a_copy_with_renamed_variables_is_flagged_and_different_code_is_not():
    one = "total = 0\nfor name, p in model.named_parameters():\n    total += p.numel()\nprint(total)"
    two = "# mine\ncount = 0\nfor n, q in model.named_parameters():\n    count += q.numel()\nprint(count)"
    other = "total = sum(p.numel() for p in model.parameters())\nprint(total)"
    canon = copies.renamed((copies.normalized(one),))
    assert canon == copies.renamed((copies.normalized(two),)) != copies.renamed((copies.normalized(other),))
    assert ("print" in str(canon)) and ("numel" in str(canon))  # built-ins and attributes keep their names


def test_an_error_in_a_cell_whose_first_line_holds_a_semicolon_keeps_the_feedback_whole():
    source = "# Save both state_dicts in `workdir`; their sizes in bytes\nx = y"
    where = _where(source, {"traceback": ["Cell In[3], line 2"]})
    assert "; " not in where and "`` # Save both state_dicts in `workdir`;" in where, where


@pytest.mark.parametrize("data", [{"image/png": "iVBOR", "text/plain": "<Figure size 640x480 with 1 Axes>"},
                                  {"image/svg+xml": "<svg/>"}])
def test_a_figure_is_not_compared(data):
    figure = nbformat.v4.new_output("display_data", data=data)
    printed = nbformat.v4.new_output("stream", name="stdout", text="66362880\n")
    assert place_independent([figure, printed]) == [printed]
