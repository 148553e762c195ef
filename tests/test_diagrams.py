"""bertfamily.diagrams: each diagram draws what its alt text says, and rejects bad input."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from bertfamily import diagrams  # noqa: E402
from bertfamily.plots import COLORS  # noqa: E402
from bertfamily.quantization import quantize_linear  # noqa: E402
from bertfamily.quiet import quiet_deprecation  # noqa: E402


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [ax.get_title() for ax in fig.axes]


def test_masking_schedules_show_one_pattern_static_and_many_dynamic():
    fig, alt = diagrams.masking_schedules(epochs=5, tokens=20, copies=2)
    assert len(fig.axes) == 3 and "1 distinct pattern" in alt and "5 distinct patterns" in alt
    coloured = [sum(p.get_facecolor()[:3] != (0.9019607843137255,) * 3 for p in ax.patches) for ax in fig.axes]
    assert coloured == [15, 15, 15]  # 3 masked tokens of 20, in each of 5 epochs
    plt.close(fig)
    with pytest.raises(ValueError, match="rate"):
        diagrams.masking_schedules(rate=1.5)
    with pytest.raises(ValueError, match="epochs"):
        diagrams.masking_schedules(epochs=0)


def test_tlm_input_restarts_positions_and_marks_the_targets():
    fig, alt = diagrams.tlm_input(["the", "red", "cat"], ["il", "gatto", "rosso"], masked=[2, 7])
    texts = _texts(fig)
    assert texts.count("[MASK]") == 2 and "red" in texts and "rosso" in texts  # targets shown in their row
    assert texts.count("0") == 2  # position 0 twice
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
    assert "5 L_ce + 2 L_mlm + 1 L_cos" in title and "T = 2" in alt
    plt.close(fig)
    with pytest.raises(ValueError, match="weights"):
        diagrams.triple_loss(weights=(1, 2))


def test_quantization_prints_torch_int8_codes_and_bounds_the_error():
    fig, alt = diagrams.quantization(rows=4, cols=6, seed=0)
    w = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))  # the function's own matrix
    s = w.abs().max().item() / 127.5
    printed = torch.tensor([int(t.get_text()) for t in fig.axes[0].texts if t.get_gid() == "int8"]).view(4, 6)
    assert torch.equal(printed, torch.round(w / s).to(torch.int64))
    assert printed.min() >= -128 and printed.max() <= 127 and printed.abs().max() >= 127  # the range is used
    with quiet_deprecation():  # torch's own qint8 tensor and quantize_dynamic's layer agree
        real = torch.quantize_per_tensor(w, s, 0, torch.qint8).int_repr()
        linear = torch.nn.Linear(6, 4)
        linear.weight.data = w.clone()
        layer = quantize_linear(torch.nn.Sequential(linear))[0].weight()
    assert torch.equal(printed, real.to(torch.int64)) and torch.equal(printed, layer.int_repr().to(torch.int64))
    assert layer.q_zero_point() == 0 and layer.q_scale() == pytest.approx(s, rel=1e-6)
    worst = (w - printed * s).abs().max().item()
    assert worst <= s / 2 + 1e-6
    assert f"s = max|w| / 127.5 = {w.abs().max().item():.4f} / 127.5 = {s:.5f}" in alt
    assert f"largest rounding error of {worst:.5f}" in alt
    assert "96 bytes in float32" in alt and "28 bytes in int8" in alt  # 24 weights: 4 bytes vs 1 (+ scale)
    assert "LayerNorm" in alt and "on the fly" in alt
    plt.close(fig)
    with pytest.raises(ValueError, match="rows must be an integer from 1 to 8"):
        diagrams.quantization(rows=0)
    with pytest.raises(ValueError, match="cols"):
        diagrams.quantization(cols=2.5)
    with pytest.raises(ValueError, match="seed must be an integer"):
        diagrams.quantization(seed="0")


SEGMENTATIONS = {
    "en": [("nation", ["▁nation"]), ("international", ["▁inter", "national"])],
    "it": [("nazionale", ["▁nazion", "ale"]), ("internazionale", ["▁inter", "nazionale"])],
    "es": [("nacional", ["▁nacional"]), ("internacional", ["▁inter", "nacional"]), ("nacionales", ["▁nacional", "es"])],
}


def test_shared_vocabulary_colours_the_pieces_of_two_or_more_languages():
    fig, alt = diagrams.shared_vocabulary(SEGMENTATIONS, model="toy")
    ax = fig.axes[0]
    pieces = [t.get_text() for t in ax.texts if t.get_style() == "normal" and t.get_weight() == "normal"]
    assert len(pieces) == len(ax.patches) == 12  # one box per piece of each word, in order
    colour = {t: matplotlib.colors.to_hex(p.get_facecolor()[:3]) for t, p in zip(pieces, ax.patches, strict=True)}
    assert colour["▁inter"] == COLORS["dynamic"]  # en, it and es
    assert {
        colour[p] for p in ("▁nation", "national", "▁nazion", "ale", "nazionale", "▁nacional", "nacional", "es")
    } == {COLORS["int8"]}  # ▁nacional twice, but in Spanish only
    assert "1 of them shared by 2 or more languages: ▁inter (en, es, it)" in alt
    assert "(en, it, es)" in alt and "9 distinct pieces" in alt and "from toy" in alt
    assert "one language only" in alt
    plt.close(fig)
    with pytest.raises(ValueError, match="non-empty dict"):
        diagrams.shared_vocabulary({})
    with pytest.raises(ValueError, match="'nation' needs at least one piece"):
        diagrams.shared_vocabulary({"en": [("nation", [])]})
    with pytest.raises(ValueError, match="pieces must be non-empty strings"):
        diagrams.shared_vocabulary({"en": [("nation", ["▁nat", 3])]})
    with pytest.raises(ValueError, match="needs at least one piece"):
        diagrams.shared_vocabulary({"en": [("nation", "▁nation")]})  # a string, not a list of pieces


def test_every_diagram_in_the_book_carries_its_alt_text():
    """A lesson cell that draws a diagram passes its alt text to myst-nb (cell metadata), as the figure says it."""
    import json
    from pathlib import Path

    found = 0
    for path in sorted(Path(__file__).resolve().parents[1].glob("book/*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "code" and "diagrams." in source and "fig, alt" in source:
                found += 1
                alt = cell["metadata"].get("mystnb", {}).get("image", {}).get("alt", "")
                assert len(alt) > 40, f"{path.name}: a diagram cell without alt text: {source[:80]!r}"
    assert found >= 6, f"expected a diagram in lessons 1 to 6, found {found}"


DRAWINGS = {
    "masking_schedules": lambda: diagrams.masking_schedules(),
    "tlm_input": lambda: diagrams.tlm_input(["the", "cat"], ["il", "gatto"], masked=[1]),
    "albert_layout": lambda: diagrams.albert_layout(),
    "triple_loss": lambda: diagrams.triple_loss(),
    "quantization": lambda: diagrams.quantization(),
    "shared_vocabulary": lambda: diagrams.shared_vocabulary(
        {"en": [("nation", ["▁nation"])], "it": [("nazione", ["▁nazione"])]}
    ),
}


@pytest.mark.parametrize("name", DRAWINGS)
def test_no_diagram_draws_outside_its_axes(name):
    """Nothing a diagram draws is cut off: a box or arrow (clipped to its panel) stays inside the panel,
    a label (never clipped) inside the figure."""
    fig, _ = DRAWINGS[name]()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    page = fig.bbox
    for ax in fig.axes:
        panel = ax.get_window_extent(renderer)
        for artist in [*ax.patches, *ax.texts]:
            box = panel if artist.get_clip_on() and not hasattr(artist, "get_text") else page
            extent = artist.get_window_extent(renderer)
            inside = (
                box.x0 - 1 <= extent.x0
                and extent.x1 <= box.x1 + 1
                and box.y0 - 1 <= extent.y0
                and extent.y1 <= box.y1 + 1
            )
            assert inside, f"{name}: {type(artist).__name__} {extent} is cut off at {box}"
    plt.close(fig)
