"""Printed tables of the lessons, kept here so that a lesson's cell shows what it measures, not how
its columns are padded."""

from __future__ import annotations

__all__ = ["int8_quality"]


def int8_quality(quality: dict, files: dict) -> None:
    """Lesson 3's table: per encoder, its file (MiB), the cosine between its embeddings and fp32's
    (mean, min), how often its nearest training title is fp32's ("same NN"), its accuracy, how many
    decisions changed; then the accuracy lost against fp32 (points, with its interval) where measured.
    Every line fits the page's column (75 characters)."""
    print(f"{'MiniLM':<25}{'MiB':>6}{'cos':>7}{'min cos':>8}{'same NN':>8}{'acc.':>7}{'changed':>8}")
    for name, q in quality.items():
        print(
            f"{name:<25}{files[name]:>6.1f}{q['cos'].mean():>7.3f}{q['cos'].min():>8.3f}"
            f"{q['same neighbour']:>8.1%}{q['accuracy']:>7.1%}{q['changed']:>8.1%}"
        )
    print("accuracy lost against fp32, points (95% interval):")
    for name, q in quality.items():
        if q["loss"]:
            print(f"  {name:<25}{q['loss']:.1f}")
