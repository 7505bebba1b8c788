"""Turn a GLiNER2 checkpoint (as the ``gliner2`` library or the Hugging Face hub saves it) into Sift's
served model directory — the layout ``build_mini`` writes — and answer the parity cases with the
Python library, so the caller (``sift models import``, src/local/modelImport.ts) can check the TS
engine against it before anything is published.

    python -m sift_trainer.export.import_checkpoint convert --checkpoint DIR --out DIR --model-id ID \\
        [--cases CASES.json --reference OUT.json]
    python -m sift_trainer.export.import_checkpoint download --repo ID --to DIR [--revision REV]

Output of ``convert``: gliner2 checkpoint (``model.save_pretrained``: config.json, encoder_config/,
model.safetensors, tokenizer files) + ``onnx/`` fragments (export_onnx.py) + ``tokenizer.json`` +
``manifest.json``. Stdout carries JSON event lines; a refused checkpoint ends with one
``import_failed`` event naming what is wrong, and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .. import process
from ..events import claim_stdout, emit
from ..files import write_json

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
# the counting layers export_onnx.py's count_embed fragment (and the TS engine) support
COUNTING_LAYERS = ("count_lstm", "count_lstm_v2")
#: gliner2 2.1.0's `_KNOWN_ARCHITECTURES`, both exported (boundary: export_boundary.py)
ARCHITECTURES = ("span", "boundary")
# The files a GLiNER2 checkpoint is read from: its configs, weights and tokenizer. Nothing else in a
# checkpoint directory is ever loaded (a hub download fetches these names only, and a local import
# loads from a directory that links to these alone), so Python files shipped beside the weights are
# never on transformers' path.
CHECKPOINT_FILES = (
    "config.json",
    "encoder_config/config.json",
    *WEIGHT_FILES,
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "added_tokens.json",
    "spm.model",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "sentencepiece.bpe.model",
)
# exact names, no glob: `encoder_config/*` also fetched a repo's .py files
DOWNLOAD_PATTERNS = list(CHECKPOINT_FILES)
# configs transformers reads an `auto_map` from (which, with trust_remote_code, imports the code it names)
CONFIG_FILES = ("config.json", "encoder_config/config.json", "tokenizer_config.json")


class CheckpointError(Exception):
    """The directory is not a GLiNER2 checkpoint this importer can convert; the message says why."""


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{what} is missing: {path}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{what} is not valid JSON ({path}): {e}") from None
    if not isinstance(value, dict):
        raise CheckpointError(f"{what} must be a JSON object: {path}")
    return value


def _names_code(value: Any) -> bool:
    """Whether a config holds an ``auto_map`` anywhere (a nested encoder config carries one the same way)."""
    if isinstance(value, dict):
        return "auto_map" in value or any(_names_code(v) for v in value.values())
    if isinstance(value, list):
        return any(_names_code(v) for v in value)
    return False


def refuse_code(ckpt: Path) -> None:
    """CheckpointError when a config names code to import. gliner2 2.1 builds the encoder with
    ``trust_remote_code=True``, so an ``auto_map`` in the backbone config would make transformers import
    (from the checkpoint, or the hub) and run the Python it names; Sift imports weights and configs only."""
    for name in CONFIG_FILES:
        path = ckpt / name
        if path.is_file() and _names_code(_read_json(path, name)):
            raise CheckpointError(
                f"{name} has an auto_map, which names Python code for transformers to import and run: Sift imports weights, "
                f"configs and tokenizers only, never a checkpoint's code. Import a checkpoint whose backbone is a standard "
                f"transformers model (its config names a model_type and no auto_map)"
            )


def known_files_view(ckpt: Path, into: Path) -> Path:
    """``into``, holding links to the checkpoint's CHECKPOINT_FILES only: gliner2 and transformers load from it."""
    for name in CHECKPOINT_FILES:
        if (ckpt / name).is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            (into / name).symlink_to((ckpt / name).resolve())
    return into


def check_checkpoint(ckpt: Path) -> dict[str, Any]:
    """The checkpoint's gliner2 config, once its files are all there, it names no code, and it is an architecture Sift serves."""
    if not ckpt.is_dir():
        raise CheckpointError(f"{ckpt} is not a directory")
    cfg = _read_json(ckpt / "config.json", "config.json (the gliner2 model config)")
    _read_json(ckpt / "encoder_config" / "config.json", "encoder_config/config.json (the backbone config)")
    refuse_code(ckpt)
    if not any((ckpt / w).is_file() for w in WEIGHT_FILES):
        raise CheckpointError(f"{ckpt} holds no weights: expected {' or '.join(WEIGHT_FILES)}")
    if not any((ckpt / t).is_file() for t in ("tokenizer.json", "tokenizer_config.json")):
        raise CheckpointError(f"{ckpt} holds no tokenizer: expected tokenizer.json or tokenizer_config.json")
    arch = cfg.get("architecture", "span")
    if arch not in ARCHITECTURES:
        raise CheckpointError(
            f"config.json architecture is {arch!r}: Sift's ONNX fragments export {' and '.join(map(repr, ARCHITECTURES))} GLiNER2 models"
        )
    if arch == "boundary":
        return cfg  # no counting layer; its head settings are checked by the export (export_boundary.py)
    counting = cfg.get("counting_layer", "count_lstm")
    if counting not in COUNTING_LAYERS:
        raise CheckpointError(
            f"config.json counting_layer is {counting!r}: the engine supports {', '.join(COUNTING_LAYERS)}"
        )
    return cfg


def load_checkpoint(ckpt: Path):
    """gliner2's ``AutoExtractor.from_pretrained`` (the architecture its config names; ``GLiNER2`` loads span
    models only) on the checkpoint's known files alone (strict: a missing or misshapen tensor is an error), as
    CheckpointError."""
    from gliner2 import AutoExtractor

    with tempfile.TemporaryDirectory(prefix="sift-checkpoint-") as view:
        try:
            model = AutoExtractor.from_pretrained(str(known_files_view(ckpt, Path(view))))
        except Exception as e:  # noqa: BLE001 — any load failure means the checkpoint is unusable
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise CheckpointError(
                f"gliner2 could not load the checkpoint at {ckpt}: {type(e).__name__}: {first}"
            ) from None
    return model.float().cpu().eval()


def _backbone(encoder_cfg: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "model_type",
        "_name_or_path",
        "num_hidden_layers",
        "hidden_size",
        "num_attention_heads",
        "intermediate_size",
        "max_position_embeddings",
        "vocab_size",
        "relative_attention",
        "position_buckets",
    )
    return {k: encoder_cfg[k] for k in keys if k in encoder_cfg}


def _architecture(model, cfg: dict[str, Any], encoder_cfg: dict[str, Any]) -> dict[str, Any]:
    """What the TS side lists for an imported model: the GLiNER2 head and backbone, vocabulary and size."""
    tok = model.processor.tokenizer
    return {
        "gliner2": cfg.get("architecture", "span"),
        "backbone": encoder_cfg.get("model_type"),
        "backbone_name": cfg.get("model_name") or encoder_cfg.get("_name_or_path"),
        **(
            {"candidate_budget": int(model.boundary_head.settings.candidate_budget)}
            if cfg.get("architecture") == "boundary"
            else {"counting_layer": cfg.get("counting_layer", "count_lstm"), "max_width": cfg.get("max_width")}
        ),
        "token_pooling": cfg.get("token_pooling"),
        "hidden_size": encoder_cfg.get("hidden_size"),
        "layers": encoder_cfg.get("num_hidden_layers"),
        "vocab_size": len(tok),
        "tokenizer": type(tok.backend_tokenizer.model).__name__
        if getattr(tok, "is_fast", False)
        else type(tok).__name__,
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "encoder_parameters": int(sum(p.numel() for p in model.encoder.parameters())),
    }


def convert(ckpt: Path, out: Path, model_id: str, cases: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Writes the served model directory ``out`` and returns its manifest (+ ``reference`` when ``cases``)."""
    t0 = time.time()
    cfg = check_checkpoint(ckpt)  # before the heavy imports: a missing file is named in a second
    import torch

    from ..build.build_mini import weights_digest
    from .export_boundary import export_boundary_fragments
    from .export_onnx import export_fragments, manifest_onnx
    from .gliner2_reference import reference_results

    process.set_threads()
    model = load_checkpoint(ckpt)
    emit(
        "import_stage",
        stage="loaded",
        seconds=round(time.time() - t0, 1),
        parameters=int(sum(p.numel() for p in model.parameters())),
    )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tok = model.processor.tokenizer
    if not (out / "tokenizer.json").exists():
        if not getattr(tok, "is_fast", False):
            raise CheckpointError(
                "the checkpoint's tokenizer has no fast (tokenizer.json) form, which the TS engine needs"
            )
        tok.backend_tokenizer.save(str(out / "tokenizer.json"))
    boundary = cfg.get("architecture") == "boundary"
    try:
        onnx_cfg = export_boundary_fragments(model, out) if boundary else export_fragments(model, out)
    except ValueError as e:  # a boundary head setting the export does not support yet, named
        raise CheckpointError(str(e)) from None
    emit("import_stage", stage="exported", seconds=round(time.time() - t0, 1), parity=onnx_cfg["parity_max_abs_diff"])
    reference = None
    if cases is not None:
        with torch.no_grad():
            reference = reference_results(model, cases)
        emit("import_stage", stage="reference", seconds=round(time.time() - t0, 1), cases=len(cases))
    source_weights = next(w for w in WEIGHT_FILES if (ckpt / w).is_file())
    encoder_cfg = json.loads((out / "encoder_config" / "config.json").read_text())
    import importlib.metadata as md

    manifest = {
        "format": "sift-model/1",
        "model_id": model_id,
        "family": "encoder",
        "architecture": "gliner2-boundary" if boundary else "gliner2-span",
        "source": {"kind": "gliner2-checkpoint", "checkpoint": str(ckpt.resolve()), "weights_file": source_weights},
        "backbone": _backbone(encoder_cfg),
        "architecture_details": _architecture(model, cfg, encoder_cfg),
        "weights_sha256": weights_digest(out / "model.safetensors"),
        "special_tokens": onnx_cfg["special_tokens"],
        "files": {
            "config": "config.json",
            "encoder_config": "encoder_config/config.json",
            "weights": "model.safetensors",
            "tokenizer": "tokenizer.json",
            "onnx_dir": "onnx/",
            "onnx_config": "onnx/gliner2_config.json",
        },
        "onnx": manifest_onnx(onnx_cfg),
        "classification_task": "classification",
        "versions": {"gliner2": md.version("gliner2"), "torch": torch.__version__},
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "import_seconds": round(time.time() - t0, 1),
    }
    write_json(out / "manifest.json", manifest)
    return {**manifest, "reference": reference}


def download(repo: str, to: Path, revision: str | None = None) -> Path:
    """A hub snapshot of ``repo``'s checkpoint files into ``to`` (short timeouts: the caller checked the hub answers)."""
    os.environ["HF_HUB_OFFLINE"] = "0"
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "10")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "30")
    from huggingface_hub import snapshot_download

    path = snapshot_download(repo_id=repo, revision=revision, local_dir=str(to), allow_patterns=DOWNLOAD_PATTERNS)
    return Path(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert", help="checkpoint directory -> served model directory")
    c.add_argument("--checkpoint", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--model-id", required=True)
    c.add_argument("--cases", help="parity cases (JSON list) to answer with the gliner2 library")
    c.add_argument("--reference", help="where to write those answers")
    d = sub.add_parser("download", help="hub repo -> checkpoint directory")
    d.add_argument("--repo", required=True)
    d.add_argument("--to", required=True)
    d.add_argument("--revision")
    args = ap.parse_args(argv)
    process.configure_process()  # HF_HUB_OFFLINE: conversion never touches the network
    claim_stdout()
    try:
        if args.cmd == "download":
            path = download(args.repo, Path(args.to), args.revision)
            emit("download_done", repo=args.repo, path=str(path))
            return 0
        cases = json.loads(Path(args.cases).read_text()) if args.cases else None
        m = convert(Path(args.checkpoint), Path(args.out), args.model_id, cases)
        if args.reference:
            Path(args.reference).write_text(json.dumps(m["reference"]))
        emit("import_done", model_id=args.model_id, out=str(Path(args.out).resolve()), seconds=m["import_seconds"])
        return 0
    except CheckpointError as e:
        emit("import_failed", error=str(e))
        return 2
    except Exception as e:  # noqa: BLE001 — reported as one event line; the traceback goes to stderr
        import traceback

        traceback.print_exc()
        emit("import_failed" if args.cmd == "convert" else "download_failed", error=f"{type(e).__name__}: {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
