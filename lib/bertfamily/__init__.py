"""BERT family course package."""

__version__ = "0.1.0"
