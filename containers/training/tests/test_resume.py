"""A job killed like an interrupted spot instance continues from its newest whole checkpoint when rerun
with the same checkpoint directory (what SageMaker restores on restart: job/resume.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PKG_ROOT, events, job_env, run_job, write_job
from safetensors.torch import load_file

from sift_trainer.build import synthetic
from sift_trainer.job import resume


def _run(job: Path, env_extra: dict[str, str] | None = None) -> tuple[int, list[dict]]:
    p = subprocess.run(
        [sys.executable, "-m", "sift_trainer.job"],
        cwd=str(PKG_ROOT),
        env={**job_env(job), **(env_extra or {})},
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode in (0, -9), p.stderr[-3000:]
    return p.returncode, events(p.stdout)


def test_a_killed_encoder_job_resumes_where_it_stopped(tmp_path, encoder_base):
    rows = synthetic.to_sift_rows(synthetic.generate_task("entities", 9, seed=4))
    hp = {
        "base_model_path": str(encoder_base),
        "training_type": "lora",
        "nr_epochs": 2,
        "batch_size": 3,  # 3 steps an epoch
        "checkpoint_every_steps": 2,  # checkpoints at steps 2 and 4: the second one mid-epoch 2
        "validation_split": 0,
        "export_onnx": False,
        "seed": 5,
    }
    reference = write_job(tmp_path / "uninterrupted", hp, rows)
    p = run_job(reference)
    assert p.returncode == 0, p.stderr[-3000:]

    job = write_job(tmp_path / "interrupted", hp, rows)
    rc, first = _run(job, {resume.KILL_AFTER_ENV: "2"})
    assert rc == -9 and [e["step"] for e in first if e["event"] == "checkpoint"] == [2, 4]
    rc, second = _run(job)
    assert rc == 0
    kinds = [e["event"] for e in second]
    assert kinds.count("resumed") == 1
    back = second[kinds.index("resumed")]
    assert (back["checkpoint"], back["step"], back["epoch"], back["skipped_batches"]) == ("checkpoint-4", 4, 2, 1)
    # steps 1-4 are not trained again; the run ends where the uninterrupted one does
    assert [e["step"] for e in second if e["event"] == "progress"] == [5, 6]
    assert second[-1]["event"] == "completed" and second[-1]["steps"] == 6

    # the same weights as the run that was never stopped: weights, optimizer, scheduler, RNG and data order restored
    ours, theirs = (load_file(str(d / "model" / "adapter" / "adapter_model.safetensors")) for d in (job, reference))
    assert ours.keys() == theirs.keys()
    for k in ours:
        assert float((ours[k] - theirs[k]).abs().max()) <= 1e-6, k

    # the job reports its run's checkpoints, the one it resumed from included, each once
    manifest = json.loads((job / "model" / "manifest.json").read_text())
    assert [c["name"] for c in manifest["checkpoints"]] == ["checkpoint-2", "checkpoint-4", "checkpoint-6", "final"]
    index = json.loads((job / "checkpoints" / resume.INDEX).read_text())
    assert [c["id"] for c in index["checkpoints"]] == [c["id"] for c in manifest["checkpoints"]]
    # disk stays bounded: training state only in the newest resumable checkpoints
    assert [d.name for d, _ in resume.resumable(job / "checkpoints")] == ["checkpoint-4", "checkpoint-6"]


def _checkpoint(root: Path, name: str, step: int, payload: bytes = b"weights") -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "adapter_model.safetensors").write_bytes(payload)
    (d / "sift_checkpoint.json").write_text(json.dumps({"name": name, "step": step}))
    resume.seal(d, {"step": step})
    return d


def test_only_whole_checkpoints_are_resumed(tmp_path):
    # what S3 can hand back after an interruption: the newest checkpoint's files only partly uploaded
    root = tmp_path / "checkpoints"
    _checkpoint(root, "checkpoint-2", 2)
    cut = _checkpoint(root, "checkpoint-4", 4)
    (cut / "adapter_model.safetensors").write_bytes(b"wei")  # cut short
    missing = _checkpoint(root, "checkpoint-6", 6)
    (missing / "adapter_model.safetensors").unlink()
    (root / f"{resume.PARTIAL_PREFIX}checkpoint-8").mkdir()
    found = resume.latest(root)
    assert found is not None and found[0].name == "checkpoint-2"
    resume.clear_partials(root)
    resume.drop_after(root, 2, ["checkpoint-2"])
    assert sorted(os.listdir(root)) == ["checkpoint-2"]


@pytest.mark.parametrize("rewritten", [True, False])
def test_the_best_flag_rewrite_keeps_a_checkpoint_whole(tmp_path, rewritten):
    d = _checkpoint(tmp_path, "checkpoint-2", 2)
    if rewritten:  # sift_checkpoint.json is rewritten when the best checkpoint moves
        (d / "sift_checkpoint.json").write_text(json.dumps({"name": "checkpoint-2", "step": 2, "is_best": True}))
    else:
        (d / "sift_checkpoint.json").unlink()
    assert (resume.complete(d) is not None) is rewritten
