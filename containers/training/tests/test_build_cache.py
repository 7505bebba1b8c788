"""The mini model build's cache: the training inputs alone decide whether the built weights are kept.

Editing the build script (its caching, export or manifest code) keeps a built model; editing the
training code or data retrains it. The model ``npm test`` set up (``SIFT_MINI_MODEL_DIR``, built before
training and export were hashed apart or after) is recognised as built, on a copy of its manifest.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import PKG_ROOT, events

SMALL = ["--examples", "24", "--stage2-examples", "8", "--eval-examples", "8", "--no-onnx"]


def _build(pkg_root: Path, out: Path, *args: str) -> list[dict[str, Any]]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(pkg_root)}
    proc = subprocess.run(
        [sys.executable, "-m", "sift_trainer.build.build_mini", "--out", str(out), *args],
        cwd=pkg_root,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [e for e in events(proc.stdout) if e["event"].startswith("build_")]


def test_an_edit_to_the_build_script_keeps_the_model_and_one_to_the_training_data_retrains(tmp_path):
    pkg_root = tmp_path / "pkg"
    shutil.copytree(PKG_ROOT / "sift_trainer", pkg_root / "sift_trainer", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "model"
    assert _build(pkg_root, out, *SMALL)[-1]["event"] == "build_done"
    weights = (out / "model.safetensors").read_bytes()

    with open(pkg_root / "sift_trainer" / "build" / "build_mini.py", "a") as f:
        f.write("\n# an edit outside the training (caching, export, manifest)\n")
    assert [e["event"] for e in _build(pkg_root, out, *SMALL)] == ["build_skipped"]
    assert (out / "model.safetensors").read_bytes() == weights

    with open(pkg_root / "sift_trainer" / "build" / "synthetic.py", "a") as f:
        f.write("\n# an edit to the training data's code\n")
    assert _build(pkg_root, out, *SMALL)[-1]["event"] == "build_done"


def test_the_set_up_mini_model_is_recognised_as_built(tmp_path):
    from sift_trainer.build import build_mini

    shared = Path(
        os.environ.get("SIFT_MINI_MODEL_DIR") or Path.home() / ".cache" / "sift" / "models" / "sift--gliner2-mini-v1"
    )
    if not (shared / "manifest.json").exists():
        pytest.skip(f"no built mini model at {shared} (npm test's set-up builds it)")
    # a copy of the manifest beside links to the weights and export: the shared model is only read
    out = tmp_path / "model"
    out.mkdir()
    for entry in shared.iterdir():
        if entry.name != "manifest.json":
            (out / entry.name).symlink_to(entry)
    original = (shared / "manifest.json").read_bytes()
    (out / "manifest.json").write_bytes(original)

    th = build_mini.training_hash(dict(build_mini.DEFAULTS))
    assert build_mini.is_built(out, th)
    assert json.loads(original).get("export_hash") == build_mini.export_hash()  # so the build below only checks
    assert [e["event"] for e in _build(PKG_ROOT, out)] == ["build_skipped"]
    migrated = json.loads((out / "manifest.json").read_text())
    assert migrated["training_hash"] == th
    assert migrated["weights_sha256"] == json.loads(original)["weights_sha256"]
    assert (shared / "manifest.json").read_bytes() == original
