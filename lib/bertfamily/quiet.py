"""What torch and torchao print that tells a reader nothing, silenced where the course calls them.

* :func:`quiet_deprecation`: torch 2.13 still ships eager-mode quantisation
  (``torch.ao.quantization``), and every import and call of it warns that it is deprecated in favour
  of torchao, and that quantised tensor dtypes will go; :mod:`bertfamily.quantization` uses it while
  torch has it (and says so), so exactly those two warnings are silenced, nothing else.
* :func:`import_torchao`: ``torchao.quantization``, imported without the log line of each CUDA kernel
  a CPU build of torch cannot load (the loggers of :data:`bertfamily.env.IMPORT_NOISE`, for the
  import only).
"""

from __future__ import annotations

import contextlib
import warnings

#: The messages of torch's own deprecation warnings for eager-mode quantisation (see quantization.quantize_linear).
_DEPRECATION_MESSAGES = (
    r"(?s).*torch\.ao\.quantization is deprecated.*",
    r"(?s).*quantize_per_tensor, torch\.quantize_per_channel and other quantized tensor creation.*",
)


@contextlib.contextmanager
def quiet_deprecation():
    """Silence exactly torch's deprecation warnings about eager-mode quantisation, nothing else."""
    with warnings.catch_warnings():
        for message in _DEPRECATION_MESSAGES:
            warnings.filterwarnings("ignore", message=message)
        yield


def import_torchao(pip_spec: str = "torchao"):
    """``torchao.quantization``, imported without its load-time log lines (it tries CUDA kernels);
    where it cannot be imported, an ``ImportError`` that says to install ``pip_spec``."""
    import logging

    from bertfamily.env import IMPORT_NOISE

    loggers = [logging.getLogger(name) for name in IMPORT_NOISE]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        import torchao.quantization as ao
    except ImportError as error:
        raise ImportError(
            f"quantising with torchao needs the package torchao (`pip install '{pip_spec}'`): {error}"
        ) from None
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
    return ao
