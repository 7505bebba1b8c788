"""Process set-up for the trainer's entry points: offline environment and torch threads.

Nothing here runs at import: each entry point (``job``, ``build.*``, ``export.*``) calls
``configure_process()`` first, before gliner2/transformers/torch are imported.
"""

from __future__ import annotations

import os


def configure_process() -> None:
    """Environment defaults every trainer process runs with (an explicit setting wins)."""
    # Never reach a model hub at run time.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    # Idle OpenMP threads sleep instead of spinning: on a small shared box a spinning pool collapses
    # throughput (10x measured) as soon as another process wants a core.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def set_threads() -> None:
    """SIFT_TORCH_THREADS, else the usable cores minus the current load (at least 1)."""
    import torch

    n = int(os.environ.get("SIFT_TORCH_THREADS", "0") or 0)
    if n <= 0:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:
            cores = os.cpu_count() or 1
        try:
            busy = int(os.getloadavg()[0] + 0.5)
        except OSError:
            busy = 0
        n = max(1, min(cores, cores - busy + 1)) if busy >= cores else cores
    torch.set_num_threads(max(1, n))
