"""How busy the trainer keeps a GPU (issue #29 row 11, goal >= 60 % utilisation), and whether mixed precision
costs F1 (goal: the mini model's F1 as in fp32).

1. builds a DeBERTa-v3-base-sized GLiNER2 offline (bench/serving/deberta_base_checkpoint.py; ``--size tiny``:
   the builder's 64 x 2 stand-in, for a CPU check of this script) unless ``--base-model`` names one;
2. fine-tunes it fully on ``--rows`` wnut17 train rows through ``python -m sift_trainer.job`` (the production
   entry point, precision and batch chosen by encoder/compute.py), sampling
   ``nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -lms 500`` and
   keeping the samples between the job's first and last ``progress`` event (the training phase);
3. fine-tunes the mini model (``--mini``) on the same rows twice, ``precision`` fp32 and auto, and prints
   both validation F1s.

Prints one JSON line per run and a summary. Without nvidia-smi it says so and still runs (utilisation null).
Run from the repository root: bash bench/gpu/train-utilisation.sh [--size tiny --rows 40 --max-steps 4]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TRAINING = REPO / "containers" / "training"
SMI = [
    "nvidia-smi",
    "--query-gpu=utilization.gpu,memory.used",
    "--format=csv,noheader,nounits",
    "-lms",
    "500",
]


def data_dir() -> Path:
    for d in (
        os.environ.get("SIFT_SHARED_DATA"),
        "/work/shared/data",
        str(REPO / "shared" / "data"),
    ):
        if d and (Path(d) / "wnut17" / "train.jsonl").exists():
            return Path(d)
    sys.exit(
        "wnut17 not found: set SIFT_SHARED_DATA to the folder holding wnut17/train.jsonl"
    )


def rows(n: int, seed: int) -> list[dict[str, Any]]:
    lines = (
        (data_dir() / "wnut17" / "train.jsonl").read_text(encoding="utf-8").splitlines()
    )
    picked = random.Random(seed).sample([json.loads(x) for x in lines if x.strip()], n)
    return picked


def build_base(size: str, out: Path) -> Path:
    env = {
        **os.environ,
        "PYTHONPATH": str(TRAINING),
        "SIFT_SHARED_DATA": str(data_dir()),
    }
    if size == "base":
        cmd = [
            sys.executable,
            str(REPO / "bench" / "serving" / "deberta_base_checkpoint.py"),
            str(out),
        ]
    else:
        cmd = [
            sys.executable,
            "-m",
            "sift_trainer.build.architectures",
            "--arch",
            "deberta-v3-count_lstm_v2",
        ]
        cmd += ["--size", size, "--out", str(out)]
    t0 = time.time()
    subprocess.run(cmd, cwd=TRAINING, env=env, check=True, stdout=subprocess.DEVNULL)
    print(
        json.dumps(
            {"built": size, "path": str(out), "seconds": round(time.time() - t0, 1)}
        ),
        flush=True,
    )
    return out


class Sampler:
    """nvidia-smi every 500 ms in the background: (time, utilisation %, memory MiB) per GPU line."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float, float]] = []
        self.proc = None
        if shutil.which("nvidia-smi") is None:
            print(
                "nvidia-smi not found: no GPU utilisation is sampled (the runs still go)",
                flush=True,
            )
            return
        self.proc = subprocess.Popen(SMI, stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                util, mem = (float(x) for x in line.split(","))
            except ValueError:
                continue
            self.samples.append((time.time(), util, mem))

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait()

    def between(self, t0: float, t1: float) -> dict[str, Any]:
        picked = [(u, m) for t, u, m in self.samples if t0 <= t <= t1]
        if self.proc is None or not picked:
            return {
                "samples": len(picked),
                "mean_util": None,
                "max_util": None,
                "max_memory_mib": None,
            }
        utils = [u for u, _ in picked]
        return {
            "samples": len(picked),
            "mean_util": round(statistics.fmean(utils), 1),
            "max_util": max(utils),
            "max_memory_mib": max(m for _, m in picked),
        }


def run_job(
    name: str,
    base: Path,
    train: list[dict[str, Any]],
    hp: dict[str, Any],
    sampler: Sampler,
) -> dict:
    job = Path(tempfile.mkdtemp(prefix=f"sift-gpu-{name}-"))
    (job / "input" / "config").mkdir(parents=True)
    (job / "input" / "data" / "train").mkdir(parents=True)
    hp = {
        "base_model_path": str(base),
        "training_type": "full",
        "export_onnx": False,
        "seed": 7,
        **hp,
    }
    (job / "input" / "config" / "hyperparameters.json").write_text(
        json.dumps({k: json.dumps(v) for k, v in hp.items()})
    )
    with open(
        job / "input" / "data" / "train" / "rows.jsonl", "w", encoding="utf-8"
    ) as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in train)
    env = {**os.environ, "SIFT_JOB_DIR": str(job), "PYTHONPATH": str(TRAINING)}
    t0 = time.time()
    p = subprocess.run(
        [sys.executable, "-m", "sift_trainer.job"],
        cwd=TRAINING,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    events = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    if p.returncode != 0:
        print(p.stderr[-3000:], file=sys.stderr)
        sys.exit(f"{name}: the job failed (exit {p.returncode}); its folder: {job}")
    progress = [e for e in events if e["event"] == "progress"]
    compute = next((e for e in events if e["event"] == "compute"), {})
    manifest = json.loads((job / "model" / "manifest.json").read_text())
    metrics = manifest.get("metrics") or {}
    steps = [b["ts"] - a["ts"] for a, b in itertools.pairwise(progress)]
    out = {
        "run": name,
        "device": compute.get("device"),
        "device_name": compute.get("device_name"),
        "precision": manifest.get("precision"),
        "batch_size": compute.get("batch_size"),
        "micro_batch_size": compute.get("micro_batch_size"),
        "gradient_accumulation_steps": compute.get("gradient_accumulation_steps"),
        "num_workers": compute.get("num_workers"),
        "steps": manifest.get("steps"),
        "median_step_s": round(statistics.median(steps), 4) if steps else None,
        "train_seconds": manifest.get("train_seconds"),
        "job_seconds": round(time.time() - t0, 1),
        "f1": metrics.get("f1"),
        "gpu": sampler.between(progress[0]["ts"], progress[-1]["ts"])
        if progress
        else None,
    }
    print(json.dumps(out), flush=True)
    shutil.rmtree(job, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--size",
        default="base",
        choices=("base", "tiny"),
        help="the DeBERTa-v3 GLiNER2 to build",
    )
    ap.add_argument(
        "--base-model", help="an existing GLiNER2 checkpoint instead of building one"
    )
    ap.add_argument(
        "--mini",
        default=str(
            Path.home() / ".cache" / "sift" / "models" / "sift--gliner2-mini-v1"
        ),
    )
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument(
        "--max-steps",
        type=int,
        default=-1,
        help="cap each run (default: the trainer's schedule)",
    )
    ap.add_argument(
        "--skip-f1",
        action="store_true",
        help="skip the mini model's fp32 vs mixed runs",
    )
    a = ap.parse_args()

    train = rows(a.rows, seed=7)
    limit = {"max_steps": a.max_steps} if a.max_steps > 0 else {}
    sampler = Sampler()
    work = Path(tempfile.mkdtemp(prefix="sift-gpu-base-"))
    try:
        base = (
            Path(a.base_model) if a.base_model else build_base(a.size, work / "model")
        )
        results = [run_job(f"{a.size}-full", base, train, limit, sampler)]
        if not a.skip_f1:
            if not (Path(a.mini) / "config.json").exists():
                sys.exit(
                    f"the mini model is not at {a.mini} (--mini PATH, or --skip-f1)"
                )
            for precision in ("fp32", "auto"):
                results.append(
                    run_job(
                        f"mini-{precision}",
                        Path(a.mini),
                        train,
                        {**limit, "precision": precision},
                        sampler,
                    )
                )
    finally:
        sampler.stop()
        shutil.rmtree(work, ignore_errors=True)
    big = results[0]
    summary = {
        "goal": ">= 60 % mean GPU utilisation over the training phase; mini F1 mixed == fp32",
        "utilisation_mean": (big["gpu"] or {}).get("mean_util"),
        "utilisation_max": (big["gpu"] or {}).get("max_util"),
        "step_s": big["median_step_s"],
        "precision": big["precision"],
    }
    if len(results) == 3:
        summary |= {
            "mini_f1_fp32": results[1]["f1"],
            "mini_f1_mixed": results[2]["f1"],
            "mini_mixed": results[2]["precision"],
        }
    print(json.dumps({"summary": summary}), flush=True)


if __name__ == "__main__":
    main()
