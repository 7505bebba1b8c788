"""SageMaker-compatible training entrypoint: ``python -m sift_trainer.job``.

Reads ``<config>/hyperparameters.json`` and ``<data>/train/`` (+ optional ``<data>/validation/``), writes
the model to ``<model>/``, checkpoints to ``<checkpoints>/``, and on error the reason to
``<output>/failure`` (exit 1). Paths follow the SageMaker contract under ``/opt/ml`` and can be
overridden by ``SIFT_JOB_DIR`` (a root holding the same layout) and the SM_* env vars
(see ``job.paths.JobPaths``). Progress is reported as JSON lines on stdout:

    {"event":"started",...}
    {"event":"progress","epoch":1,"step":3,"total_steps":30,"loss":1.23,...}
    {"event":"checkpoint","id":"<uuid>","step":10,"epoch":1,"metrics":{...},"path":"..."}
    {"event":"metrics","scope":"validation"|"final","metrics":{...}}
    {"event":"completed","metrics":{f1,precision,recall,...},"model_dir":"..."}  (exit 0)
    {"event":"stopped","checkpoint":{...}}                                        (SIGTERM; exit 143)
    {"event":"failed","error":"..."}                                               (exit 1)
"""

from __future__ import annotations

import json
import logging
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from .. import __version__ as SIFT_TRAINER_VERSION
from ..data.rows import DatasetError, is_decoder_rows, read_rows
from ..events import claim_stdout, emit
from ..files import write_json
from ..process import configure_process
from . import stop
from .hyperparameters import HyperparameterError, load_hyperparameters
from .paths import JobPaths

EXIT_STOPPED = 143


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version(), "sift_trainer": SIFT_TRAINER_VERSION}
    for p in ("torch", "transformers", "gliner2", "peft", "trl", "onnx", "onnxruntime"):
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            pass
    return out


def _family(base: Path, rows: list[dict[str, Any]]) -> str:
    from ..decoder.training import is_decoder_checkpoint
    from ..encoder.training import is_encoder_checkpoint

    if is_encoder_checkpoint(base):
        if is_decoder_rows(rows):
            raise DatasetError("the base model is an encoder but the dataset holds decoder rows (messages/prompt)")
        return "encoder"
    if is_decoder_checkpoint(base):
        if rows and "text" in rows[0] and not is_decoder_rows(rows):
            raise DatasetError("the base model is a decoder but the dataset holds encoder rows (text + labels)")
        return "decoder"
    raise FileNotFoundError(
        f"base_model_path {base} holds neither a GLiNER2 checkpoint nor a causal LM (config.json / .gguf)"
    )


def run(paths: JobPaths) -> int:
    t_start = time.time()
    hp = load_hyperparameters(paths)
    emit(
        "started",
        hyperparameters={k: v for k, v in hp.__dict__.items() if k != "extra"},
        extra=hp.extra,
        model_dir=str(paths.model_dir),
        checkpoints_dir=str(paths.checkpoints_dir),
    )
    base = Path(hp.base_model_path)
    if not base.exists():
        raise FileNotFoundError(f"base_model_path does not exist: {base}")
    train_rows = read_rows(paths.channel("train"))
    val_dir = paths.channel("validation")
    val_rows = read_rows(val_dir) if val_dir.exists() else None
    family = _family(base, train_rows)
    emit("family", family=family)
    if stop.stop_requested():
        raise stop.StopRequested(None)
    paths.model_dir.mkdir(parents=True, exist_ok=True)

    manifest: dict[str, Any] = {
        "format": "sift-model/1",
        "family": family,
        "model_name": hp.model_name or None,
        "base_model_path": str(base.resolve()),
        "training_type": hp.training_type,
        "training_algorithm": hp.training_algorithm if family == "decoder" else "sft",
        "hyperparameters": {k: v for k, v in hp.__dict__.items() if k != "extra"},
        "versions": _versions(),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if family == "encoder":
        if hp.training_algorithm != "sft":
            raise HyperparameterError(f"encoder models train with 'sft' only (got {hp.training_algorithm!r})")
        from ..encoder.training import architecture_of, save_encoder_model, train_encoder
        from ..export.export_onnx import manifest_onnx

        res = train_encoder(hp, paths, train_rows, val_rows)
        saved = save_encoder_model(res["model"], paths.model_dir, export_onnx=hp.export_onnx, pooled=res["pooled"])
        metrics = res["metrics"]
        onnx_cfg = saved["onnx"]
        with open(paths.model_dir / "validation.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in res.get("validation_data") or [])
        manifest.update(
            {
                "architecture": f"gliner2-{architecture_of(res['model'])}",
                "tasks": res["info"].to_dict(),
                "inference_schema": res["info"].schema(),
                "classification_task": "classification",
                "files": {
                    "config": "config.json",
                    "encoder_config": "encoder_config/config.json",
                    "weights": "model.safetensors",
                    "tokenizer": "tokenizer.json",
                    "tokenizer_config": "tokenizer_config.json",
                    "onnx_dir": "onnx/" if onnx_cfg else None,
                    "onnx_config": "onnx/gliner2_config.json" if onnx_cfg else None,
                    "pooled_classifier": "onnx/pooled_classifier.onnx" if saved["pooled"] else None,
                    "pooled_classifier_config": "onnx/pooled_classifier.json" if saved["pooled"] else None,
                    "adapter": "adapter/" if res["adapter_dir"] else None,
                    "validation": "validation.jsonl",
                },
                "special_tokens": onnx_cfg["special_tokens"] if onnx_cfg else None,
                "onnx": manifest_onnx(onnx_cfg) if onnx_cfg else None,
                # the pooled route (encoder/pooled_cls.py): its json, parity and contrastive stage
                "pooled_classifier": {**saved["pooled"], "contrastive": res["pooled"].contrastive}
                if saved["pooled"]
                else None,
            }
        )
    else:
        from ..decoder.training import save_decoder_model, train_decoder

        res = train_decoder(hp, paths, train_rows, val_rows)
        files = save_decoder_model(res, paths.model_dir, merge=bool(hp.extra.get("save_merged", False)))
        metrics = res["metrics"]
        manifest.update({"architecture": "causal-lm-lora", "files": files, "rl_config": hp.rl_config or None})
    manifest.update(
        {
            "metrics": metrics,
            "train_rows": res["train_rows"],
            "validation_rows": res["validation_rows"],
            "steps": res["steps"],
            "epochs": res["epochs"],
            "train_seconds": round(res["train_seconds"], 2),
            # encoder jobs: the device, precision and batch they trained with (encoder/compute.py)
            "precision": (res.get("compute") or {}).get("precision", "fp32"),
            "compute": res.get("compute"),
            "checkpoints": [
                {k: c[k] for k in ("id", "name", "step", "epoch", "metrics", "is_best", "is_final", "path")}
                for c in res["checkpoints"]
            ],
            "total_seconds": round(time.time() - t_start, 2),
        }
    )
    write_json(paths.model_dir / "metrics.json", metrics)
    write_json(paths.model_dir / "manifest.json", manifest)
    write_json(paths.output_data_dir / "metrics.json", metrics)
    summary = {k: metrics[k] for k in ("f1", "precision", "recall") if k in metrics} or metrics
    emit(
        "completed",
        metrics=summary,
        model_dir=str(paths.model_dir),
        steps=res["steps"],
        seconds=manifest["total_seconds"],
    )
    return 0


def _failure_text(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return "out of memory: the training process exhausted the available memory (MemoryError)"
    name = type(exc).__name__
    msg = str(exc).strip() or name
    if "out of memory" in msg.lower() or "CUDA out of memory" in msg:
        return f"out of memory: {msg}"[:1024]
    prefix = {
        "HyperparameterError": "invalid hyperparameters",
        "DatasetError": "invalid dataset",
        "FileNotFoundError": "missing file",
    }.get(name, name)
    return f"{prefix}: {msg}"[:1024]


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    configure_process()
    claim_stdout()
    stop.install()
    paths = JobPaths.from_env()
    try:
        if paths.failure_file.exists():
            paths.failure_file.unlink()
    except OSError:
        pass
    try:
        return run(paths)
    except stop.StopRequested as s:
        emit("stopped", checkpoint=s.checkpoint)
        return EXIT_STOPPED
    except BaseException as exc:  # noqa: BLE001 — every error must land in the failure file
        if isinstance(exc, KeyboardInterrupt) and stop.stop_requested():
            emit("stopped", checkpoint=None)
            return EXIT_STOPPED
        text = _failure_text(exc)
        traceback.print_exc(file=sys.stderr)
        try:
            paths.failure_file.parent.mkdir(parents=True, exist_ok=True)
            paths.failure_file.write_text(text + "\n")
        except OSError as e:
            sys.stderr.write(f"could not write failure file {paths.failure_file}: {e}\n")
        emit("failed", error=text, errors=getattr(exc, "errors", None) or None)
        return 1


if __name__ == "__main__":
    sys.exit(main())
