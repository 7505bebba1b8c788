"""Bad input ends in a failure file + non-zero exit; SIGTERM stops with a checkpoint."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import PKG_ROOT, events, job_env, run_job, write_job

from sift_trainer.build import synthetic


def _failure(job: Path) -> str:
    f = job / "output" / "failure"
    assert f.exists()
    return f.read_text()


def test_columns_fit_no_head(tmp_path, encoder_base):
    job = write_job(tmp_path / "job", {"base_model_path": str(encoder_base)}, [{"text": "hello", "foo": 1}] * 5)
    p = run_job(job, timeout=120)
    assert p.returncode == 1
    assert "fit no encoder head" in _failure(job)
    assert events(p.stdout)[-1]["event"] == "failed"


def test_structure_value_not_in_text(tmp_path, encoder_base):
    rows = [{"text": "Order 3 lamps for $20.", "json_structures": [{"order": {"item": "lamps", "price": "$25"}}]}] * 5
    job = write_job(tmp_path / "job", {"base_model_path": str(encoder_base), "training_type": "full"}, rows)
    p = run_job(job, timeout=120)
    assert p.returncode == 1
    text = _failure(job)
    assert "invalid dataset" in text and "not a verbatim substring" in text and "row 0" in text


def test_mixed_label_columns(tmp_path, encoder_base):
    rows = [{"text": "good", "label": "pos"}, {"text": "bad", "labels": ["neg"]}] * 3
    job = write_job(tmp_path / "job", {"base_model_path": str(encoder_base)}, rows)
    p = run_job(job, timeout=120)
    assert p.returncode == 1 and "mixes 'label' and 'labels'" in _failure(job)


def test_bad_hyperparameters(tmp_path, encoder_base):
    rows = [{"text": "good", "label": "pos"}] * 5
    job = write_job(
        tmp_path / "job", {"base_model_path": str(encoder_base), "training_algorithm": "dpo", "nr_epochs": 0}, rows
    )
    p = run_job(job, timeout=120)
    assert p.returncode == 1
    text = _failure(job)
    assert "invalid hyperparameters" in text and "requires an rl_config" in text and "nr_epochs" in text


def test_unknown_base_model(tmp_path):
    job = write_job(tmp_path / "job", {"base_model_path": str(tmp_path / "nope")}, [{"text": "a", "label": "b"}])
    p = run_job(job, timeout=120)
    assert p.returncode == 1 and "base_model_path does not exist" in _failure(job)


def test_sigterm_saves_checkpoint_and_stops(tmp_path, encoder_base):
    rows = synthetic.to_sift_rows(synthetic.generate_task("entities", 200, seed=9))
    job = write_job(
        tmp_path / "job",
        {
            "base_model_path": str(encoder_base),
            "training_type": "full",
            "nr_epochs": 5,
            "batch_size": 2,
            "validation_split": 0,
        },
        rows,
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "sift_trainer.job"],
        cwd=str(PKG_ROOT),
        env=job_env(job),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines = []
    deadline = time.time() + 240
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if '"event": "progress"' in line and json.loads(line)["step"] >= 2:
            proc.send_signal(signal.SIGTERM)
            break
    rest, _ = proc.communicate(timeout=240)
    ev = events("".join(lines) + rest)
    assert proc.returncode == 143, ev[-3:]
    assert ev[-1]["event"] == "stopped"
    ck = ev[-1]["checkpoint"]
    assert ck and "stopped" in ck["name"]
    assert (Path(ck["path"]) / "model.safetensors").exists()
    assert (Path(ck["path"]) / "sift_checkpoint.json").exists()
    assert not (job / "output" / "failure").exists()
    assert not (job / "model" / "manifest.json").exists()


def test_one_label_classification_only(tmp_path, encoder_base):
    # every row the same single label: nothing to choose between (gliner2 itself would crash on it)
    rows = [{"text": f"row {i} is fine", "label": "normal"} for i in range(6)]
    job = write_job(tmp_path / "job", {"base_model_path": str(encoder_base)}, rows)
    p = run_job(job, timeout=120)
    assert p.returncode == 1
    text = _failure(job)
    assert (
        "invalid dataset" in text
        and "'label' column holds only 'normal'" in text
        and "at least two distinct labels" in text
    )
