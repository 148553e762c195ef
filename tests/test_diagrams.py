"""bertfamily.diagrams: each diagram draws what its alt text says, and rejects bad input."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from bertfamily import diagrams  # noqa: E402


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [ax.get_title() for ax in fig.axes]


def test_masking_schedules_show_one_pattern_static_and_many_dynamic():
    fig, alt = diagrams.masking_schedules(epochs=5, tokens=20, copies=2)
    assert len(fig.axes) == 3 and "1 distinct pattern" in alt and "5 distinct patterns" in alt
    coloured = [sum(p.get_facecolor()[:3] != (0.9019607843137255,) * 3 for p in ax.patches) for ax in fig.axes]
    assert coloured == [15, 15, 15]          # 3 masked tokens of 20, in each of 5 epochs
    plt.close(fig)
    with pytest.raises(ValueError, match="rate"):
        diagrams.masking_schedules(rate=1.5)
    with pytest.raises(ValueError, match="epochs"):
        diagrams.masking_schedules(epochs=0)


def test_tlm_input_restarts_positions_and_marks_the_targets():
    fig, alt = diagrams.tlm_input(["the", "red", "cat"], ["il", "gatto", "rosso"], masked=[2, 7])
    texts = _texts(fig)
    assert texts.count("[MASK]") == 2 and "red" in texts and "rosso" in texts   # targets shown in their row
    assert texts.count("0") == 2                                               # position 0 twice
    assert "red, rosso" in alt and "en" in alt
    plt.close(fig)
    with pytest.raises(ValueError, match="not \\[CLS\\]/\\[SEP\\]"):
        diagrams.tlm_input(["a"], ["b"], masked=[0])
    with pytest.raises(ValueError, match="at least one token"):
        diagrams.tlm_input([], ["b"])


def test_albert_layout_counts_the_factorised_table():
    fig, alt = diagrams.albert_layout()
    assert "3.9M" in alt and "23.0M" in alt and "applied 12 times" in " ".join(_texts(fig))
    plt.close(fig)
    with pytest.raises(ValueError, match="embedding"):
        diagrams.albert_layout(embedding=0)


def test_triple_loss_names_each_term_and_weight():
    fig, alt = diagrams.triple_loss(temperature=2.0, weights=(5, 2, 1))
    title = fig.axes[0].get_title()
    assert "5 L_ce + 2 L_task + 1 L_cos" in title and "T = 2" in alt
    plt.close(fig)
    with pytest.raises(ValueError, match="weights"):
        diagrams.triple_loss(weights=(1, 2))
