"""The training half of the ``sift/gliner2-mini-v1`` build: the GLiNER2 span model on MiniLM, trained
on ``synthetic.py`` data and scored on held-out synthetic rows.

This file and ``synthetic.py`` are the build's training code: their bytes are in the training hash
(``build_mini.training_hash``), so a change here retrains the model, while a change to ``build_mini.py``
(caching, ONNX export, manifest) never does. Not hashed, as before the split: the encoder sampling
config and the ``data/`` helpers used here (bump ``TRAINING_VERSION`` when a change there matters).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict

from ..encoder.sampling import sampling_config
from ..events import emit

# Bump to retrain every cached build, e.g. after a change to an input that is not hashed.
TRAINING_VERSION = 2

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


def train(work: Path, params: Dict[str, Any]) -> Dict[str, Any]:
    """Trains the model in ``work`` (a fresh directory); returns it with what the manifest records."""
    import shutil

    import torch
    from gliner2 import ExtractorConfig, GLiNER2
    from gliner2.training.trainer import ExtractorTrainer, TrainingConfig

    from . import synthetic
    from ..base_models import minilm_dir

    torch.set_num_threads(int(params["threads"]))
    torch.use_deterministic_algorithms(True, warn_only=True)
    t0 = time.time()
    torch.manual_seed(params["seed"])
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
    shutil.rmtree(work / "_train", ignore_errors=True)
    return {"model": model, "steps": steps, "train_seconds": train_seconds, "eval_report": eval_report, "special_token_init": init}
