"""The job's model is its best validation checkpoint, not its last step (checkpoint_selection.py).

Real training runs on the mini model. To make the last weights reliably worse than an earlier
checkpoint the training rows carry *wrong* entity labels (each label renamed to another one of the
set) while the validation rows keep the true ones: every step teaches the model something the
validation rows punish, so validation F1 falls as training goes on.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import events, run_job, write_job

from sift_trainer.build import synthetic


def _mislabelled(rows):
    labels = sorted({e["label"] for r in rows for e in r["entities"]})
    wrong = {a: labels[(i + len(labels) // 2) % len(labels)] for i, a in enumerate(labels)}
    return [{**r, "entities": [{**e, "label": wrong[e["label"]]} for e in r["entities"]]} for r in rows]


def _tensors(path: Path):
    from safetensors.torch import load_file

    return load_file(str(path))


def _same_tensors(a: Path, b: Path) -> bool:
    ta, tb = _tensors(a), _tensors(b)
    return ta.keys() == tb.keys() and all(bool((ta[k] == tb[k]).all()) for k in ta)


def _run(tmp_path, encoder_base, training_type: str, **hp):
    if not (Path(encoder_base) / "manifest.json").exists():
        # the premise (a base model that already finds entities, so wrong labels can only hurt) needs
        # the built mini model; the untrained stand-in conftest builds without it knows nothing yet
        pytest.skip("needs the built mini model (SIFT_MINI_MODEL_DIR, as npm run test:trainer sets)")
    rows = synthetic.to_sift_rows(synthetic.generate_task("entities", 40, seed=5))
    train, val = _mislabelled(rows[:24]), rows[24:]
    job = write_job(
        tmp_path / "job",
        {
            "base_model_path": str(encoder_base),
            "training_type": training_type,
            "nr_epochs": 2,
            "batch_size": 4,
            "checkpoint_every_steps": 2,
            "seed": 4,
            **hp,
        },
        train,
        val,
    )
    p = run_job(job)
    assert p.returncode == 0, p.stderr[-3000:]
    ev = events(p.stdout)
    curve = [e for e in ev if e["event"] == "metrics" and e["scope"] == "validation"]
    ckpts = [e for e in ev if e["event"] == "checkpoint"]
    chosen = next(e for e in ev if e["event"] == "best_checkpoint")
    saved = json.loads((job / "output" / "data" / "metrics.json").read_text())
    return job, (train, val), curve, ckpts, chosen, saved


def _check_choice(curve, ckpts, chosen, saved):
    f1_at = {e["step"]: e["metrics"]["f1"] for e in curve}
    # the training really got worse: the last evaluation is below the best one
    assert len(f1_at) >= 3
    last_step = max(f1_at)
    assert f1_at[last_step] < max(f1_at.values())
    # the chosen checkpoint is the best by validation F1 in the per-step log
    assert chosen["metrics"]["f1"] == max(f1_at.values())
    assert f1_at[chosen["step"]] == chosen["metrics"]["f1"] and chosen["step"] < last_step
    assert chosen["last_step"] == last_step and chosen["last_metrics"]["f1"] == f1_at[last_step]
    # the job's metrics and checkpoints say so
    assert saved["checkpoint_selection"] == "best_validation_f1"
    assert saved["best_step"] == chosen["step"] and saved["best_epoch"] == chosen["epoch"]
    assert saved["trained_steps"] == last_step
    final = next(c for c in ckpts if c["is_final"])
    assert final["step"] == chosen["step"] and final["selected_from"] == chosen["name"]
    assert final["metrics"]["f1"] == chosen["metrics"]["f1"]
    source = next(c for c in ckpts if c["name"] == chosen["name"])
    on_disk = [json.loads((Path(c["path"]) / "sift_checkpoint.json").read_text()) for c in ckpts]
    assert [c["name"] for c in on_disk if c["is_best"]] == [chosen["name"]]
    return source, final


def _exported_f1(model_dir: Path, data):
    """The exported model scored on the validation rows the way the trainer scores a checkpoint."""
    from sift_trainer.data.metrics import evaluate
    from sift_trainer.data.rows import infer_tasks
    from sift_trainer.encoder.prompt_budget import GroupedExtractor, max_positions
    from sift_trainer.encoder.training import load_model

    train, val = data
    model = load_model(model_dir)
    model.eval()
    limit = max_positions(model)
    return evaluate(GroupedExtractor(model, limit) if limit else model, val, infer_tasks(train + val))["f1"]


def test_full_training_keeps_the_best_checkpoint(tmp_path, encoder_base):
    job, data, curve, ckpts, chosen, saved = _run(tmp_path, encoder_base, "full", learning_rate=3e-5, task_lr=3e-4)
    source, final = _check_choice(curve, ckpts, chosen, saved)
    # the exported weights and the final checkpoint are the chosen checkpoint's, bit for bit
    assert _same_tensors(job / "model" / "model.safetensors", Path(source["path"]) / "model.safetensors")
    assert _same_tensors(Path(final["path"]) / "model.safetensors", Path(source["path"]) / "model.safetensors")
    # and scoring the exported model again gives the chosen checkpoint's F1, not the last step's
    exported = _exported_f1(job / "model", data)
    assert exported == pytest.approx(chosen["metrics"]["f1"], abs=1e-6)
    assert saved["f1"] == pytest.approx(exported, abs=1e-6)
    assert exported > chosen["last_metrics"]["f1"]
    # the base model is still the bar, and a job that only got worse says so
    assert saved["baseline_f1"] >= saved["f1"] and any("does not beat the base model" in w for w in saved["warnings"])
    manifest = json.loads((job / "model" / "manifest.json").read_text())
    assert manifest["metrics"]["best_step"] == chosen["step"]
    assert (job / "model" / "onnx" / "encoder.onnx").exists()


def test_lora_training_exports_the_best_adapter(tmp_path, encoder_base):
    job, data, curve, ckpts, chosen, saved = _run(tmp_path, encoder_base, "lora", learning_rate=1e-3, export_onnx=False)
    source, final = _check_choice(curve, ckpts, chosen, saved)
    assert _same_tensors(
        job / "model" / "adapter" / "adapter_model.safetensors", Path(source["path"]) / "adapter_model.safetensors"
    )
    assert _same_tensors(
        Path(final["path"]) / "adapter_model.safetensors", Path(source["path"]) / "adapter_model.safetensors"
    )
    exported = _exported_f1(job / "model", data)
    assert exported == pytest.approx(chosen["metrics"]["f1"], abs=1e-6)


def test_without_held_out_rows_the_last_weights_are_the_model(tmp_path, encoder_base):
    """No nr_epochs: the trainer sizes the run from the data (8 rows: 1 step an epoch, the epoch cap)."""
    from sift_trainer.encoder import schedule

    rows = synthetic.to_sift_rows(synthetic.generate_task("entities", 8, seed=2))
    job = write_job(
        tmp_path / "job",
        {
            "base_model_path": str(encoder_base),
            "training_type": "full",
            "validation_split": 0,
            "seed": 1,
            "export_onnx": False,
        },
        rows,
    )
    p = run_job(job)
    assert p.returncode == 0, p.stderr[-3000:]
    ev = events(p.stdout)
    plan = next(e for e in ev if e["event"] == "schedule")
    assert plan["epochs"] == schedule.MAX_EPOCHS and plan["steps_per_epoch"] == 1 and "nr_epochs" in plan["automatic"]
    progress = [e for e in ev if e["event"] == "progress"]
    assert progress[-1]["step"] == progress[-1]["total_steps"] == plan["planned_steps"]
    assert not [e for e in ev if e["event"] == "best_checkpoint"]
    saved = json.loads((job / "output" / "data" / "metrics.json").read_text())
    assert saved["checkpoint_selection"] == "last" and saved["best_step"] is None and saved["evaluated_on"] == "train"
    assert saved["trained_steps"] == plan["planned_steps"]


def test_too_few_held_out_annotations_keep_the_last_weights(tmp_path, encoder_base):
    """Held-out rows with a handful of entities cannot rank checkpoints: the last weights, no early stop."""
    from sift_trainer.encoder import checkpoint_selection

    if not (Path(encoder_base) / "manifest.json").exists():
        pytest.skip("needs the built mini model (SIFT_MINI_MODEL_DIR, as npm run test:trainer sets)")
    rows = synthetic.to_sift_rows(synthetic.generate_task("entities", 40, seed=5))
    val = [r for r in rows[24:] if r["entities"]][:2]
    support = sum(len(r["entities"]) for r in val)
    assert 0 < support < checkpoint_selection.MIN_SELECTION_SUPPORT
    job = write_job(
        tmp_path / "job",
        {
            "base_model_path": str(encoder_base),
            "training_type": "full",
            "nr_epochs": 2,
            "batch_size": 4,
            "checkpoint_every_steps": 2,
            "seed": 4,
            "early_stopping_patience": 1,
            "export_onnx": False,
        },
        _mislabelled(rows[:24]),
        val,
    )
    p = run_job(job)
    assert p.returncode == 0, p.stderr[-3000:]
    ev = events(p.stdout)
    decided = next(e for e in ev if e["event"] == "checkpoint_selection")
    assert decided["policy"] == "last" and decided["validation_support"] == support
    assert not [e for e in ev if e["event"] == "best_checkpoint"]
    progress = [e for e in ev if e["event"] == "progress"]
    assert progress[-1]["step"] == progress[-1]["total_steps"]  # patience 1 did not end the run on noise
    saved = json.loads((job / "output" / "data" / "metrics.json").read_text())
    assert saved["checkpoint_selection"] == "last" and saved["evaluated_on"] == "validation"
    assert "gold annotations" in saved["checkpoint_selection_reason"]
    ckpts = [e for e in ev if e["event"] == "checkpoint"]
    last = max((c for c in ckpts if not c["is_final"]), key=lambda c: c["step"])
    assert last["step"] == progress[-1]["step"]
    assert _same_tensors(job / "model" / "model.safetensors", Path(last["path"]) / "model.safetensors")


def test_selection_policy_follows_the_held_out_support():
    from sift_trainer.encoder import checkpoint_selection as cs

    few = {"per_head": {"entities": {"support": 2}}}
    many = {"per_head": {"entities": {"support": 15}, "relations": {"support": 10}}}
    assert cs.validation_support(few) == 2 and cs.validation_support(many) == 25 and cs.validation_support({}) == 0
    assert cs.policy(None, 2)[0] == "last" and cs.policy("auto", 25)[0] == "best"
    assert cs.policy("best", 2) == ("best", "requested") and cs.policy("last", 500) == ("last", "requested")
    with pytest.raises(ValueError, match="checkpoint_selection"):
        cs.policy("newest", 5)
