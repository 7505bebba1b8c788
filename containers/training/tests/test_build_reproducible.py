"""The offline base model build is reproducible: the same training hash gives the same weights.

Two small builds of ``sift/gliner2-mini-v1`` (same code and parameters, fewer examples) run in fresh
processes under different outside conditions — a different thread setting, a different str hash seed
and another process loading the CPU — and must write bit-identical tensors. The full build differs only
in the number of examples, so what makes these two equal makes any two builds of one hash equal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import PKG_ROOT

SMALL = ["--examples", "24", "--stage2-examples", "8", "--eval-examples", "8", "--no-onnx"]


def _build(out: Path, extra_env: dict) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **extra_env}
    proc = subprocess.run([sys.executable, "-m", "sift_trainer.build.build_mini", "--out", str(out), *SMALL],
                          cwd=PKG_ROOT, env=env, check=False, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "manifest.json").read_text())


def test_two_builds_under_different_conditions_write_identical_weights(tmp_path):
    first = _build(tmp_path / "a", {"SIFT_TORCH_THREADS": "1", "PYTHONHASHSEED": "123", "OMP_NUM_THREADS": "1"})
    burner = subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<600: pass"])
    try:
        second = _build(tmp_path / "b", {"SIFT_TORCH_THREADS": "2", "PYTHONHASHSEED": "random"})
    finally:
        burner.kill()
    assert first["training_hash"] == second["training_hash"]
    assert first["build_params"]["threads"] == 2
    assert len(first["weights_sha256"]) == 64
    assert first["weights_sha256"] == second["weights_sha256"]
    assert first["synthetic_eval"] == second["synthetic_eval"]
