"""Real encoder training through the SageMaker entrypoint (gliner2 trainer on the MiniLM backbone)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import events, run_job, write_job

from sift_trainer.build import synthetic


def _rows(seed: int):
    recs = (
        synthetic.generate_task("entities", 14, seed=seed)
        + [
            r
            for r in synthetic.generate_task("classification", 20, seed=seed)
            if not r["output"]["classifications"][0].get("multi_label")
        ][:8]
        + synthetic.generate_task("structures", 8, seed=seed)
        + synthetic.generate_task("relations", 8, seed=seed)
    )
    return synthetic.to_sift_rows(recs)


def _check_model_dir(model_dir: Path, manifest_heads):
    manifest = json.loads((model_dir / "manifest.json").read_text())
    assert manifest["family"] == "encoder"
    assert set(manifest["tasks"]["heads"]) == set(manifest_heads)
    m = manifest["metrics"]
    for k in ("f1", "precision", "recall"):
        assert isinstance(m[k], float) and 0.0 <= m[k] <= 1.0
    assert m["n_examples"] > 0
    if "json_structures" in manifest_heads:
        assert any("." in k for k in m["per_field"])
    for f in (
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "encoder_config/config.json",
        "onnx/encoder.onnx",
        "onnx/span_rep.onnx",
        "onnx/count_pred.onnx",
        "onnx/count_embed.onnx",
        "onnx/classifier.onnx",
        "onnx/gliner2_config.json",
        # what the TS engine serves: span scoring in one graph, slot-0 count embedding, the int8 encoder
        "onnx/span_scores.onnx",
        "onnx/count_embed_c1.onnx",
        "onnx/encoder.int8.onnx",
    ):
        assert (model_dir / f).exists(), f
    # a label column adds the pooled classifier (encoder/pooled_cls.py); no label column, no fragment
    pooled = "classification" in manifest_heads
    assert (model_dir / "onnx" / "pooled_classifier.onnx").exists() == pooled
    assert (model_dir / "onnx" / "pooled_classifier.json").exists() == pooled
    assert (manifest["pooled_classifier"] is not None) == pooled
    assert ("route_metrics" in m) == pooled
    if pooled:
        assert set(m["route_metrics"]) >= {"pooled", "gliner2"}
        assert manifest["files"]["pooled_classifier"] == "onnx/pooled_classifier.onnx"
        assert manifest["pooled_classifier"]["contrastive"]["pairs"] > 0
    cfg = json.loads((model_dir / "onnx" / "gliner2_config.json").read_text())
    assert max(cfg["parity_max_abs_diff"].values()) < 1e-3
    assert cfg["format"] == "sift-gliner2-fragments/2"
    assert cfg["scorer"]["max_abs_score_diff"] < 1e-4
    assert cfg["encoder_graph"]["attention"] == "eager"
    # the output is a regular gliner2 checkpoint
    from gliner2 import GLiNER2

    model = GLiNER2.from_pretrained(str(model_dir))
    out = model.extract_entities("Alice Smith works for Acme Corp in Paris.", ["person", "company", "city"])
    assert "entities" in out
    # and the ONNX encoder runs
    import onnxruntime as ort

    sess = ort.InferenceSession(str(model_dir / "onnx" / "encoder.onnx"), providers=["CPUExecutionProvider"])
    ids = np.array(
        [[cfg["special_tokens"]["[P]"], 2000, 2001, cfg["special_tokens"]["[SEP_TEXT]"], 2002]], dtype=np.int64
    )
    hidden = sess.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0]
    assert hidden.shape == (1, 5, cfg["hidden_size"])
    # the int8 encoder answers the same input closely (dynamic int8 MatMuls, not exact: cosine 0.98 measured
    # on this 5-token input; a broken quantization lands far below)
    q = ort.InferenceSession(str(model_dir / "onnx" / "encoder.int8.onnx"), providers=["CPUExecutionProvider"])
    hidden8 = q.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0]
    cos = float((hidden * hidden8).sum() / (np.linalg.norm(hidden) * np.linalg.norm(hidden8)))
    assert cos > 0.95, cos
    return manifest


def test_encoder_full_multihead(tmp_path, encoder_base):
    rows = _rows(11)
    job = write_job(
        tmp_path / "job",
        {
            "base_model_path": str(encoder_base),
            "training_type": "full",
            "nr_epochs": 2,
            "learning_rate": 5e-5,
            "seed": 3,
            "validation_split": 0.2,
            "batch_size": 8,
        },
        rows,
    )
    p = run_job(job)
    assert p.returncode == 0, p.stderr[-3000:]
    ev = events(p.stdout)
    kinds = [e["event"] for e in ev]
    assert kinds[0] == "started" and kinds[-1] == "completed"
    prog = [e for e in ev if e["event"] == "progress"]
    assert prog and all(isinstance(e["loss"], float) for e in prog)
    assert prog[-1]["step"] == prog[-1]["total_steps"]
    ckpts = [e for e in ev if e["event"] == "checkpoint"]
    assert len(ckpts) >= 3  # two epochs + final
    for c in ckpts:
        assert (Path(c["path"]) / "sift_checkpoint.json").exists()
        assert len(c["id"]) == 36
    assert not (job / "output" / "failure").exists()
    manifest = _check_model_dir(job / "model", ["entities", "classification", "json_structures", "relations"])
    assert manifest["training_type"] == "full"
    # the CPU trains as before (encoder/compute.py): fp32, the job's batch in one pass, no loader workers
    assert manifest["precision"] == "fp32"
    compute_event = next(e for e in ev if e["event"] == "compute")
    assert {k: compute_event[k] for k in manifest["compute"]} == manifest["compute"]
    assert {k: manifest["compute"][k] for k in ("device", "micro_batch_size", "gradient_accumulation_steps")} == {
        "device": "cpu",
        "micro_batch_size": 8,
        "gradient_accumulation_steps": 1,
    }
    assert (job / "output" / "data" / "metrics.json").exists()

    # continue training from a checkpoint of this job
    job2 = write_job(
        tmp_path / "job2",
        {
            "base_model_path": ckpts[0]["path"],
            "training_type": "full",
            "nr_epochs": 1,
            "max_steps": 2,
            "seed": 3,
            "validation_split": 0.2,
        },
        rows,
    )
    p2 = run_job(job2)
    assert p2.returncode == 0, p2.stderr[-3000:]


def test_encoder_lora_with_validation_channel(tmp_path, encoder_base):
    rows = synthetic.to_sift_rows(synthetic.generate_task("entities", 30, seed=5))
    job = write_job(
        tmp_path / "job",
        {
            "base_model_path": str(encoder_base),
            "training_type": "lora",
            "nr_epochs": 1,
            "learning_rate": 1e-3,
            "seed": 1,
            "early_stopping_patience": 2,
        },
        rows[:24],
        rows[24:],
    )
    p = run_job(job)
    assert p.returncode == 0, p.stderr[-3000:]
    ev = events(p.stdout)
    ds = next(e for e in ev if e["event"] == "dataset")
    assert ds["train_rows"] == 24 and ds["validation_rows"] == 6
    ckpts = [e for e in ev if e["event"] == "checkpoint"]
    assert ckpts and all(c["kind"] == "adapter" for c in ckpts)
    assert (Path(ckpts[0]["path"]) / "adapter_config.json").exists()
    assert (job / "model" / "adapter" / "adapter_config.json").exists()
    _check_model_dir(job / "model", ["entities"])
    # an adapter checkpoint is a valid base for a new job (applied to its recorded base and merged)
    from sift_trainer.encoder.training import load_model

    m = load_model(Path(ckpts[0]["path"]))
    assert m.hidden_size == 384


def test_a_job_that_learns_nothing_says_so(tmp_path, encoder_base):
    """The base model is scored on the held-out rows first; a job no better than it carries a warning."""
    rows = synthetic.to_sift_rows(synthetic.generate_task("entities", 20, seed=8))
    job = write_job(
        tmp_path / "job",
        {
            "base_model_path": str(encoder_base),
            "training_type": "full",
            "nr_epochs": 1,
            "max_steps": 1,
            "learning_rate": 1e-12,
            "task_lr": 1e-12,
            "seed": 2,
            "export_onnx": False,
        },
        rows[:14],
        rows[14:],
    )
    p = run_job(job)
    assert p.returncode == 0, p.stderr[-3000:]
    ev = events(p.stdout)
    baseline = next(e for e in ev if e["event"] == "metrics" and e["scope"] == "baseline")
    final = next(e for e in ev if e["event"] == "metrics" and e["scope"] == "final")
    assert final["metrics"]["f1"] == pytest.approx(
        baseline["metrics"]["f1"], abs=1e-9
    )  # a 1e-12 step (encoder and heads) changes nothing
    warnings = [e["message"] for e in ev if e["event"] == "warning"]
    assert len(warnings) == 1 and "does not beat the base model" in warnings[0]
    saved = json.loads((job / "output" / "data" / "metrics.json").read_text())
    assert saved["baseline_f1"] == baseline["metrics"]["f1"]
    assert saved["warnings"] == warnings
