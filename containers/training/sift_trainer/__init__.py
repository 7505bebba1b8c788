"""Sift's Python trainer: the SageMaker-compatible training job and the tools that build and export models.

Subpackages: ``job`` (the job entry, ``python -m sift_trainer.job``), ``encoder`` / ``decoder`` (training
per model family), ``data`` (dataset rows and metrics), ``export`` (ONNX export, checkpoint import),
``build`` (offline base-model builds and parity fixtures). Importing any module has no side effect on the
process: entry points call ``process.configure_process()`` themselves.
"""

__version__ = "0.1.0"
