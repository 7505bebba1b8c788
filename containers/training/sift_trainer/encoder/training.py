"""Encoder (GLiNER2 span and boundary model) training with the gliner2 trainer: full and LoRA."""

from __future__ import annotations

import json
import logging
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from .. import process
from ..data.rows import DatasetError, convert, infer_tasks, require_trainable, split
from ..events import emit
from ..files import write_json
from ..job import resume
from ..job.hyperparameters import Hyperparameters
from ..job.paths import JobPaths
from ..job.stop import StopRequested, stop_requested
from . import checkpoint_selection, cls_loss, cls_warmup, compute, pooled_cls, sampling, schedule
from . import resume as encoder_resume
from .prompt_budget import (
    GroupedExtractor,
    PromptFitter,
    cap_class_negatives,
    check_records,
    max_positions,
    rows_over_words,
    sampled_dataset,
)

log = logging.getLogger("sift_trainer.encoder")

# epochs, batch size, learning rates and warm-up when the job does not set them: schedule.py
#: single-label classification: non-gold labels per training prompt (sampled softmax; 0 = all)
DEFAULT_MAX_CLASS_NEGATIVES = 15
EVAL_ROWS_PER_EPOCH = 400


def is_encoder_checkpoint(path: Path) -> bool:
    path = Path(path)
    if (path / "adapter_config.json").exists() and not (path / "config.json").exists():
        meta_file = path / "sift_checkpoint.json"
        if not meta_file.exists():
            return False
        try:
            meta = json.loads(meta_file.read_text())
        except Exception:  # noqa: BLE001 - an unreadable marker: not an encoder checkpoint
            return False
        return (
            meta.get("family", "encoder") == "encoder"
            and bool(meta.get("base_model_path"))
            and Path(meta["base_model_path"]) != path
            and is_encoder_checkpoint(Path(meta["base_model_path"]))
        )
    cfg = path / "config.json"
    if not cfg.exists():
        return False
    try:
        with open(cfg) as f:
            c = json.load(f)
    except Exception:  # noqa: BLE001 - an unreadable config: not an encoder checkpoint
        return False
    return c.get("model_type") == "extractor" or "counting_layer" in c


def architecture_of(model) -> str:
    """gliner2's architecture of a loaded model: ``span`` (GLiNER2) or ``boundary`` (GLiNER2.5)."""
    return str(getattr(model, "architecture", "span"))


#: LoRA targets when a job names none: the encoder and every task head (for span models the list gliner2's
#: own trainer defaults to; a boundary model's heads are ``classifier``, ``boundary_head``, ``relation_scorer``)
DEFAULT_LORA_TARGETS = {
    "span": ["encoder", "span_rep", "classifier", "count_embed", "count_pred"],
    "boundary": ["encoder", "all_task_heads"],
}


def load_model(path: Path):
    """Load a GLiNER2 checkpoint of either architecture (gliner2's ``AutoExtractor``: ``GLiNER2`` for span models,
    its boundary extractor for GLiNER2.5); an adapter-only dir is applied to its recorded base and merged."""
    from gliner2 import AutoExtractor

    path = Path(path)
    if (path / "config.json").exists():
        return AutoExtractor.from_pretrained(str(path), map_location="cpu")
    if (path / "adapter_config.json").exists():
        meta = {}
        if (path / "sift_checkpoint.json").exists():
            with open(path / "sift_checkpoint.json") as f:
                meta = json.load(f)
        base = meta.get("base_model_path")
        if not base:
            with open(path / "adapter_config.json") as f:
                base = json.load(f).get("base_model_name_or_path")
        if not base or not Path(base).exists():
            raise FileNotFoundError(f"adapter checkpoint {path} does not name an available base model (got {base!r})")
        from peft import PeftModel

        model = AutoExtractor.from_pretrained(str(base), map_location="cpu")
        peft_model = PeftModel.from_pretrained(model, str(path))
        return peft_model.merge_and_unload()
    raise FileNotFoundError(f"{path} is not a GLiNER2 checkpoint (no config.json or adapter_config.json)")


def _make_trainer_class():
    from gliner2.training.trainer import ExtractorTrainer

    class SiftExtractorTrainer(ExtractorTrainer):
        """gliner2 trainer + structured progress/checkpoint events + graceful stop."""

        sift_base_model_path: str = ""
        sift_last_eval: dict[str, Any] = {}  # noqa: RUF012 - a default only: each eval assigns a new dict
        sift_checkpoints: list[dict[str, Any]] = []  # noqa: RUF012 - a default only: train() gives each trainer its own
        sift_stopped_checkpoint: dict[str, Any] | None = None
        sift_fitter: PromptFitter | None = None
        sift_max_class_negatives: int | None = None
        sift_eval_dataset: Any = None
        sift_last_eval_step: int = -1
        #: the evaluated checkpoint the job's model comes from (checkpoint_selection.py); None = the last weights
        sift_selected: dict[str, Any] | None = None
        #: too few held-out annotations to rank checkpoints (checkpoint_selection.policy): the last weights stay
        sift_keep_last: bool = False
        #: LoRA jobs whose classification head was warmed up (cls_warmup.py): the whole head trains and is
        #: saved in every adapter, so a checkpoint applied to the recorded base carries the warmed-up head.
        #: A class attribute because gliner2's __init__ applies LoRA before the instance can be configured.
        sift_head_in_adapter: bool = False
        #: the checkpoint a restarted job continues from, until the loop is back where it stopped (resume.py)
        sift_resume: encoder_resume.Pending | None = None
        sift_train_loader: encoder_resume.ResumableLoader | None = None
        sift_epoch_rng: dict[str, Any] | None = None

        def _create_dataloader(self, dataset, batch_size: int, shuffle: bool = True, is_training: bool = True):
            loader = super()._create_dataloader(dataset, batch_size, shuffle, is_training)
            if not is_training:
                return loader
            self.sift_train_loader = encoder_resume.ResumableLoader(loader, self)
            return self.sift_train_loader

        def _setup_lora(self):
            if not (self.config.use_lora and self.sift_head_in_adapter):
                return super()._setup_lora()
            # gliner2's Extractor.apply_lora, with the head moved from the LoRA targets to PEFT's
            # modules_to_save (a full trainable copy, saved with the adapter and kept by merge_and_unload)
            from gliner2.training.lora import _cast_lora_dtype, _PeftLoraLayer
            from gliner2.training.lora_targets import _resolve_targets
            from peft import LoraConfig, get_peft_model

            for p in self.model.parameters():
                p.requires_grad = False
            targets = [t for t in self.config.lora_target_modules if t not in ("classifier", "classification_head")]
            cfg = LoraConfig(
                r=self.config.lora_r,
                lora_alpha=self.config.lora_alpha,
                lora_dropout=self.config.lora_dropout,
                target_modules=_resolve_targets(self.model, targets),
                bias="none",
                use_dora=self.config.lora_use_dora,
                modules_to_save=["classifier"],
                base_model_name_or_path=getattr(self.model, "name_or_path", "") or None,
            )
            self.model = get_peft_model(self.model, cfg)
            _cast_lora_dtype(self.model)
            self.lora_layers = {n: m for n, m in self.model.named_modules() if isinstance(m, _PeftLoraLayer)}
            self.model._lora_layers = self.lora_layers

        def _log_metrics(self, metrics, prefix: str = ""):
            super()._log_metrics(metrics, prefix)
            if hasattr(metrics, "to_dict"):
                metrics = metrics.to_dict()
            if prefix == "train":
                emit(
                    "progress",
                    epoch=int(self.epoch) + 1,
                    epoch_float=round(float(metrics.get("epoch", self.epoch)), 4),
                    step=int(self.global_step),
                    total_steps=int(getattr(self, "_planned_max_steps", 0) or 0),
                    loss=float(metrics.get("loss", 0.0)),
                    classification_loss=metrics.get("classification_loss"),
                    structure_loss=metrics.get("structure_loss"),
                    count_loss=metrics.get("count_loss"),
                    learning_rate=metrics.get("learning_rate"),
                )
                if stop_requested():
                    name = f"checkpoint-stopped-{self.global_step}"
                    self._save_checkpoint(name)
                    raise StopRequested(self.sift_checkpoints[-1] if self.sift_checkpoints else None)
            elif prefix == "eval":
                self.sift_last_eval = {k: v for k, v in metrics.items() if k not in ("step", "epoch")}
                self.sift_last_eval_step = int(self.global_step)
                emit(
                    "metrics",
                    scope="validation",
                    step=int(self.global_step),
                    epoch=int(self.epoch) + 1,
                    metrics=self.sift_last_eval,
                )

        def _prepare_data(self, data, is_train: bool = True):
            # examples whose schema prompt could exceed the encoder's positions: gold + sampled negatives
            # single-label classification: gold + a few sampled negatives per read (cls_loss.py)
            ds = super()._prepare_data(data, is_train)
            if not is_train:
                self.sift_eval_dataset = ds
            if ds is None or (self.sift_fitter is None and self.sift_max_class_negatives is None):
                return ds
            return sampled_dataset(
                ds,
                self.sift_fitter,
                int(self.config.seed),
                training=is_train,
                max_class_negatives=self.sift_max_class_negatives,
            )

        def _select_best_weights(self) -> None:
            """Before the final save: put the best evaluated weights back into the model (checkpoint_selection.py)."""
            if self.compute_metrics is None or self.sift_eval_dataset is None or self.sift_keep_last:
                return  # nothing held out, or too little to choose by: the last weights are the model
            if self.sift_last_eval_step != int(self.global_step):
                # steps trained after the last evaluation (eval every N steps): score them like any checkpoint
                self._evaluate(self.sift_eval_dataset)
            last = {
                "name": "final",
                "step": int(self.global_step),
                "epoch": int(self.epoch) + 1,
                "metrics": {
                    k: self.sift_last_eval[k]
                    for k in ("f1", "precision", "recall", "eval_loss")
                    if k in self.sift_last_eval
                },
            }
            chosen = checkpoint_selection.select_best(self.sift_checkpoints + [last])
            if chosen is None:
                return
            if chosen is not last:
                checkpoint_selection.restore_weights(
                    self.model,
                    Path(chosen["path"]),
                    adapter=bool(self.config.use_lora and self.config.save_adapter_only),
                )
                self.sift_last_eval = dict(chosen["metrics"])
            self.sift_selected = {
                "name": chosen["name"],
                "step": chosen["step"],
                "epoch": chosen["epoch"],
                "metrics": dict(chosen["metrics"]),
                "last_step": int(self.global_step),
                "last_metrics": dict(last["metrics"]),
            }
            emit("best_checkpoint", selected_by="validation_f1", **self.sift_selected)

        def _save_checkpoint(self, name: str):
            if name == "best":
                return  # is_best is tracked on the epoch checkpoints instead of a duplicate directory
            if name == "final":
                if self.sift_resume is not None:  # resumed after its last step: straight to the final save
                    self.sift_resume.finish(self)
                self._select_best_weights()
            ckpt_dir = self.output_dir / name
            tmp = resume.partial_dir(self.output_dir, name)  # whole before it takes its name (job/resume.py)
            super()._save_checkpoint(tmp.name)
            metrics = dict(self.sift_last_eval)
            step, epoch = int(self.global_step), int(self.epoch) + 1
            if name == "final" and self.sift_selected is not None:  # the final checkpoint holds the selected weights
                step, epoch = self.sift_selected["step"], self.sift_selected["epoch"]
            cid = str(uuid.uuid4())
            meta = {
                "id": cid,
                "name": name,
                "family": "encoder",
                "step": step,
                "epoch": epoch,
                "metrics": {k: metrics[k] for k in ("f1", "precision", "recall", "eval_loss") if k in metrics},
                "is_best": False,
                "is_final": name == "final",
                "kind": "adapter" if (self.config.use_lora and self.config.save_adapter_only) else "full",
                "base_model_path": self.sift_base_model_path,
                "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "path": str(ckpt_dir),
            }
            if name == "final" and self.sift_selected is not None:
                meta["selected_from"] = self.sift_selected["name"]
                meta["trained_steps"] = int(self.global_step)
            best = checkpoint_selection.select_best(self.sift_checkpoints + [meta])
            for c in self.sift_checkpoints:
                if c["is_best"] != (c is best):  # the flag moved: keep the earlier checkpoint's file true
                    c["is_best"] = c is best
                    write_json(Path(c["path"]) / "sift_checkpoint.json", c)
            meta["is_best"] = meta is best
            write_json(tmp / "sift_checkpoint.json", meta)
            self.sift_checkpoints.append(meta)
            # the final checkpoint holds the selected weights: nothing to continue from
            if name != "final" and resume.states_wanted():
                encoder_resume.save_state(self, tmp)
            resume.publish(tmp, ckpt_dir)
            resume.write_index(self.output_dir, self.sift_checkpoints)
            resume.prune_states(self.output_dir, [encoder_resume.STATE_FILE])
            emit("checkpoint", **meta)
            resume.after_checkpoint(len(self.sift_checkpoints))

    return SiftExtractorTrainer


def _training_config(
    hp: Hyperparameters,
    out_dir: Path,
    plan: schedule.Schedule,
    has_val: bool,
    comp: compute.Compute,
    architecture: str = "span",
):
    """``plan``: epochs from the dataset's size, rates per training type; explicit hyperparameters win
    (schedule.py); ``comp``: micro-batch, accumulation, precision and loader workers (compute.py). (Higher
    rates for classification-only jobs were tried and did not leave the plateau in the real trainer:
    docs/experiments/training.md "Classification with many labels"; the defaults stay.)"""
    from gliner2.training.trainer import TrainingConfig

    lora = hp.training_type == "lora"
    kwargs = {
        "output_dir": str(out_dir),
        "experiment_name": "sift",
        "num_epochs": plan.epochs,
        "max_steps": plan.max_steps,
        "encoder_lr": plan.encoder_lr,
        "task_lr": plan.task_lr,
        "max_grad_norm": float(hp.extra.get("max_grad_norm", 1.0)),
        "warmup_ratio": plan.warmup_ratio,
        "scheduler_type": str(hp.extra.get("scheduler", "linear")),
        "seed": hp.seed,
        "logging_steps": 1,
        "eval_strategy": "epoch" if hp.checkpoint_every_steps <= 0 else "steps",
        "eval_steps": max(1, hp.checkpoint_every_steps or 500),
        "save_total_limit": 0,
        "save_best": False,
        "metric_for_best": "f1" if has_val else "eval_loss",
        "greater_is_better": has_val,
        "early_stopping": bool(has_val and hp.early_stopping_patience > 0),
        "early_stopping_patience": max(1, hp.early_stopping_patience),
        "max_len": int(hp.extra.get("max_words", 256)),
        "use_lora": lora,
        "lora_r": hp.lora_r,
        "lora_alpha": hp.lora_alpha,
        "lora_target_modules": list(hp.extra.get("lora_targets", DEFAULT_LORA_TARGETS[architecture])),
        "save_adapter_only": True,
        **comp.trainer_config(),
    }
    return TrainingConfig(**kwargs)


def _warm_up_classifier(hp: Hyperparameters, model, records, fitter: PromptFitter | None, max_negatives: int) -> bool:
    """Single-label classification-only jobs: no encoder dropout, then the head fitted alone (cls_warmup.py).

    Returns whether the head was fitted (a LoRA job then keeps the whole head in its adapter)."""
    if not hp.extra.get("encoder_dropout", False):
        cls_warmup.quiet_encoder_dropout(model)

    def prepare(rec, rng):
        if max_negatives > 0:
            rec = {**rec, "output": cap_class_negatives(rec["output"], rng, max_negatives)}
        return fitter.fit(rec, rng, worst=False) if fitter is not None else rec

    steps = int(hp.extra.get("head_warmup_steps", cls_warmup.DEFAULT_HEAD_WARMUP_STEPS))
    if steps <= 0:
        return False
    emit("head_warmup", **cls_warmup.fit_head(model, records, prepare, steps=steps, seed=hp.seed))
    return True


def train_encoder(
    hp: Hyperparameters, paths: JobPaths, train_rows: list[dict[str, Any]], val_rows: list[dict[str, Any]] | None
) -> dict[str, Any]:
    import torch

    process.set_threads()
    torch.manual_seed(hp.seed)
    info = require_trainable(infer_tasks(train_rows + (val_rows or [])))
    if val_rows is None:
        train_rows, val_rows = split(train_rows, hp.validation_split, hp.seed)
    train_records = convert(train_rows, info)
    convert(val_rows, info)  # validates the validation rows with the same rules
    emit("dataset", train_rows=len(train_rows), validation_rows=len(val_rows), tasks=info.to_dict())
    for warning in info.warnings:
        emit("warning", message=warning)

    base = Path(hp.base_model_path)
    model = load_model(base)
    emit(
        "model_loaded",
        base_model_path=str(base),
        hidden_size=int(model.hidden_size),
        parameters=int(sum(p.numel() for p in model.parameters())),
    )
    # on the trainer's device from here on: the baseline evaluation and the head warm-up run there too
    comp = compute.for_model(
        compute.detect(),
        model,
        extra=hp.extra,
        requested_batch=hp.batch_size,
        default_batch=schedule.DEFAULT_BATCH_SIZE,
        lora=hp.training_type == "lora",
    )
    model.to(comp.device)
    emit("compute", **comp.to_dict())
    log.info(
        "training on %s (%s), precision %s, %d rows a step",
        comp.device,
        comp.device_name,
        comp.precision,
        comp.batch_size,
    )

    from ..data.metrics import evaluate, learning_warnings

    ckpt_root = paths.checkpoints_dir
    ckpt_root.mkdir(parents=True, exist_ok=True)
    # single-label classification: softmax cross-entropy over gold + sampled negatives (cls_loss.py);
    # classification_loss "bce" keeps gliner2's summed binary loss over every label
    single_label = "classification" in info.heads and not info.multi_label
    classification_only = single_label and info.heads == ["classification"]
    plan = schedule.plan(hp, len(train_records), classification_only, auto_batch=comp.batch_size)
    cfg = _training_config(hp, ckpt_root, plan, bool(val_rows), comp, architecture_of(model))
    emit("schedule", **plan.to_dict())
    # a boundary model keeps gliner2's own classification loss (its mean BCE): cls_loss hooks the span model's
    softmax = (
        single_label
        and str(hp.extra.get("classification_loss", "softmax")) != "bce"
        and architecture_of(model) == "span"
    )
    model.processor.sampling_config = sampling.sampling_config(hp.extra.get("sampling"), single_label=softmax)
    max_negatives = int(hp.extra.get("max_negative_labels", DEFAULT_MAX_CLASS_NEGATIVES)) if softmax else 0
    if softmax:
        cls_loss.install(model)
    eval_records = convert(val_rows, info) if val_rows else None

    # Label sets whose prompt does not fit the encoder (prompt_budget.py): sample negatives in
    # training, predict in label groups for metrics; labels that can never fit are a dataset error.
    limit = max_positions(model)
    fitter = PromptFitter(model.processor, limit, max_words=cfg.max_len) if limit else None
    if fitter is not None:
        n_sampled, bad = check_records(fitter, train_records, worst=True)
        n_eval_sampled, bad_eval = check_records(fitter, eval_records or [], worst=False)
        problems = [(f"training row {i}", why, train_records[i]["input"]) for i, why in bad]
        problems += [(f"validation row {i}", why, eval_records[i]["input"]) for i, why in bad_eval]  # type: ignore[index]
        if problems:
            head = "; ".join(f"{where} ({text[:40]!r}): {why}" for where, why, text in problems[:3])
            more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
            raise DatasetError(
                f"{len(problems)} row(s) cannot fit the encoder's {limit} positions: {head}{more}",
                [{"row": None, "field": None, "message": f"{w}: {y}"} for w, y, _t in problems],
            )
        emit(
            "prompt_budget",
            max_positions=limit,
            max_words=cfg.max_len,
            train_rows_sampled=n_sampled,
            validation_rows_sampled=n_eval_sampled,
        )

    # gliner2 trains on a text's first max_len words: say how many rows that cuts, never silently
    long_train = rows_over_words(model.processor, train_records, cfg.max_len)
    long_eval = rows_over_words(model.processor, eval_records or [], cfg.max_len)
    if long_train or long_eval:
        emit(
            "long_texts",
            max_words=cfg.max_len,
            train_rows_cut=len(long_train),
            validation_rows_cut=len(long_eval),
            first_rows=long_train[:5],
        )
        log.warning(
            "%d training and %d validation (eval-loss) row(s) have more than %d words; gliner2 reads the first %d "
            "(hyperparameter max_words)",
            len(long_train),
            len(long_eval),
            cfg.max_len,
            cfg.max_len,
        )

    def scorer(m):
        return GroupedExtractor(m, limit) if limit else m

    eval_subset = val_rows[:EVAL_ROWS_PER_EPOCH]

    def compute_metrics(m, _eval_dataset):
        return evaluate(scorer(m), eval_subset, info) if eval_subset else {}

    # the base model on the same held-out rows: the bar a fine-tuned model has to clear
    baseline_metrics = evaluate(scorer(model), val_rows, info) if val_rows else {}
    if baseline_metrics:
        emit("metrics", scope="baseline", step=0, metrics=baseline_metrics)

    # the held-out rows pick the job's weights only when they hold enough gold annotations to rank them
    selection, selection_reason = checkpoint_selection.policy(
        hp.extra.get("checkpoint_selection"), checkpoint_selection.validation_support(baseline_metrics)
    )
    if val_rows:
        emit(
            "checkpoint_selection",
            policy=selection,
            reason=selection_reason,
            validation_support=checkpoint_selection.validation_support(baseline_metrics),
        )
    if selection == "last":
        cfg.early_stopping = False  # a stop decided by the same noisy F1 would end the run at random

    head_warmed = False
    if softmax and classification_only:
        head_warmed = _warm_up_classifier(hp, model, train_records, fitter, max_negatives)

    Trainer = _make_trainer_class()
    Trainer.sift_head_in_adapter = head_warmed and hp.training_type == "lora"
    trainer = Trainer(model, cfg, compute_metrics=compute_metrics if val_rows else None)
    trainer.sift_base_model_path = str(base.resolve())
    trainer.sift_checkpoints = []
    trainer.sift_keep_last = selection == "last"
    trainer.sift_fitter = fitter
    trainer.sift_max_class_negatives = max_negatives if max_negatives > 0 else None
    trainer.sift_resume = encoder_resume.Pending.find(ckpt_root)  # a restarted (spot-interrupted) job
    t0 = time.time()
    summary = trainer.train(train_data=train_records, eval_data=eval_records)
    train_seconds = time.time() - t0

    # the pooled classifier's contrastive stage tunes what the job trains, before the adapter is saved
    pooled_mode = pooled_cls.mode(hp, info)
    contrastive = (
        pooled_cls.contrastive_stage(hp, trainer.model, train_rows, info, comp.device) if pooled_mode == "on" else None
    )

    # merge LoRA for the exported model (the adapter is also kept)
    trained = trainer.model
    adapter_dir = None
    if hp.training_type == "lora":
        adapter_dir = paths.model_dir / "adapter"
        if adapter_dir.exists():
            shutil.rmtree(adapter_dir)
        trained.save_pretrained(str(adapter_dir))
        trained = trained.merge_and_unload()
    trained.eval()

    if val_rows:
        final_metrics = evaluate(scorer(trained), val_rows, info)
        final_metrics["evaluated_on"] = "validation"
    else:  # too few rows to hold any out (or validation_split = 0): report training-set fit, labelled as such
        final_metrics = evaluate(scorer(trained), train_rows[:EVAL_ROWS_PER_EPOCH], info)
        final_metrics["evaluated_on"] = "train"
    pooled = None
    if pooled_mode == "on":  # fitted on the final encoder: the one exported and served
        pooled = pooled_cls.fit(trained, train_rows, val_rows, info.class_labels, info.multi_label, hp.seed)
        pooled.contrastive = contrastive or {}
        pooled.route_metrics["gliner2"] = pooled_cls.gliner2_route(final_metrics, info.multi_label)
        pooled.route_metrics["evaluated_on"] = "validation" if val_rows else "none"
        emit("pooled_classifier", labels=len(pooled.labels), contrastive=pooled.contrastive, **pooled.route_metrics)
        final_metrics["route_metrics"] = dict(pooled.route_metrics)
    if final_metrics:
        if baseline_metrics:
            final_metrics["baseline_f1"] = baseline_metrics.get("f1", 0.0)
        final_metrics.update(_selection_metrics(trainer))
        if val_rows:
            final_metrics["checkpoint_selection_reason"] = selection_reason
        final_metrics["warnings"] = learning_warnings(baseline_metrics, final_metrics, len(val_rows))
        final_metrics["data_warnings"] = list(info.warnings)
        for warning in final_metrics["warnings"]:
            emit("warning", message=warning)
        emit("metrics", scope="final", step=int(trainer.global_step), metrics=final_metrics)
    return {
        "model": trained,
        "info": info,
        "metrics": final_metrics,
        "train_seconds": train_seconds,
        "steps": int(trainer.global_step),
        "epochs": int(summary.get("total_epochs", 0)),
        "checkpoints": trainer.sift_checkpoints,
        "adapter_dir": adapter_dir,
        "pooled": pooled,
        "train_rows": len(train_rows),
        "validation_rows": len(val_rows),
        "compute": comp.to_dict(),
        # the held-out rows themselves: the service re-scores the exported model on them with its evaluator
        "validation_data": val_rows,
    }


def _selection_metrics(trainer) -> dict[str, Any]:
    """Which weights the model is: the best validation checkpoint's epoch and step, or the last ones."""
    chosen = trainer.sift_selected
    if chosen is None:
        return {
            "checkpoint_selection": "last",
            "best_epoch": None,
            "best_step": None,
            "trained_steps": int(trainer.global_step),
        }
    return {
        "checkpoint_selection": "best_validation_f1",
        "best_epoch": chosen["epoch"],
        "best_step": chosen["step"],
        "best_checkpoint": chosen["name"],
        "trained_steps": chosen["last_step"],
    }


def save_encoder_model(
    model, out_dir: Path, *, export_onnx: bool = True, pooled: pooled_cls.PooledClassifier | None = None
) -> dict[str, Any]:
    """Write a gliner2 checkpoint + onnx/ fragments (+ the pooled classifier's) + tokenizer.json to ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir))
    onnx_cfg = pooled_meta = None
    if export_onnx:
        from ..export.export_boundary import export_boundary_fragments
        from ..export.export_onnx import export_fragments

        export = export_boundary_fragments if architecture_of(model) == "boundary" else export_fragments
        onnx_cfg = export(model, out_dir)
        if pooled is not None:
            from ..export.export_pooled import export_pooled

            pooled_meta = export_pooled(model, pooled, out_dir)
    return {"onnx": onnx_cfg, "pooled": pooled_meta}
