"""Printed tables of the lessons, kept here so that a lesson's cell shows what it measures, not how
its columns are padded."""
from __future__ import annotations

__all__ = ["int8_quality"]


def int8_quality(quality: dict, files: dict) -> None:
    """Lesson 3's table: per encoder, its file (MiB), the cosine between its embeddings and fp32's
    (mean, min), how often its nearest training title is fp32's, its accuracy, how many decisions
    changed, and the accuracy lost against fp32 (points, with its interval) where measured."""
    print(f"{'MiniLM':<26}{'file MiB':>9}{'mean cos':>10}{'min cos':>9}{'same 1-NN':>11}"
          f"{'accuracy':>10}{'changed':>9}   accuracy lost (points, 95%)")
    for name, q in quality.items():
        lost = f"   {q['loss']:.1f}" if q["loss"] else ""
        print(f"{name:<26}{files[name]:>9.1f}{q['cos'].mean():>10.3f}{q['cos'].min():>9.3f}"
              f"{q['same neighbour']:>11.1%}{q['accuracy']:>10.1%}{q['changed']:>9.1%}{lost}")
