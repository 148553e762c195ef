import torch

from bertfamily import tables
from bertfamily.stats import Interval


def test_int8_quality_prints_a_row_per_encoder(capsys):
    quality = {
        "fp32": {"cos": torch.ones(3), "same neighbour": 1.0, "accuracy": 0.9, "changed": 0.0, "loss": None},
        "int8": {
            "cos": torch.tensor([0.99, 0.98, 0.97]),
            "same neighbour": 0.95,
            "accuracy": 0.88,
            "changed": 0.02,
            "loss": Interval(2.0, 0.5, 3.5),
        },
    }
    tables.int8_quality(quality, {"fp32": 86.7, "int8": 22.1})
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5 and lines[1].startswith("fp32") and "0.970" in lines[2] and "[" not in lines[1]
    assert lines[4].startswith("  int8") and lines[4].rstrip().endswith("2.0 [0.5, 3.5]")
    assert max(len(line) for line in lines) <= 75
