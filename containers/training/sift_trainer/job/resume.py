"""Resuming a job from its own checkpoints after SageMaker restarts it (a managed spot interruption).

The AWS behaviour this module relies on, in one place:

* "Resume training from a checkpoint"
  https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints-resume.html — when a job restarts,
  SageMaker copies everything under ``CheckpointConfig.S3Uri`` back into ``LocalPath``
  (/opt/ml/checkpoints); continuing from it is the training script's job.
* "Use checkpoints in Amazon SageMaker"
  https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html — files written under
  ``LocalPath`` are uploaded to S3 while the job runs, file by file. An interruption can therefore leave
  a checkpoint in S3 with only some of its files, and the earlier attempt's files stay in S3 (nothing
  here assumes a local delete or rename reaches S3).

Hence: a checkpoint directory is written under a temporary name and renamed when whole (a kill mid-write
leaves the previous good one), it counts as resumable only when its marker (written last) lists every
file with its size and they all match, and the index (``sift_checkpoints.json``) names the checkpoints
of the run the job reports — the service registers those only (src/core/training/lifecycle.ts).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..events import emit
from ..files import write_json

#: written last into a resumable checkpoint: its training position and its files' sizes
MARKER = "sift_resume.json"
#: the checkpoints of the current run, rewritten at each save (and on resume, without the stale ones)
INDEX = "sift_checkpoints.json"
PARTIAL_PREFIX = ".partial-"
#: resumable checkpoints kept: the newest may be only partly uploaded when the instance goes
KEEP_STATES = 2
#: fault injection for tests: SIGKILL the trainer once this many checkpoints are complete, as spot does
KILL_AFTER_ENV = "SIFT_KILL_AFTER_CHECKPOINTS"
#: rewritten in place when the best checkpoint moves (atomically): only required to be there
REWRITTEN = "sift_checkpoint.json"


def states_wanted() -> bool:
    """Whether checkpoints carry the training state a restart resumes from (optimizer, scheduler, RNG).

    On SageMaker they must: a spot interruption restarts the job. Local mode never restarts a job (one
    a crash interrupted is failed), and it uploads every checkpoint's files to the model store, where
    optimizer state (twice the weights for AdamW) would only cost time and space: its runner sets
    ``SIFT_RESUME_STATE=0`` (src/local/trainingRunner.ts).
    """
    return os.environ.get("SIFT_RESUME_STATE", "1") != "0"


def partial_dir(root: Path, name: str) -> Path:
    return root / f"{PARTIAL_PREFIX}{name}"


def clear_partials(root: Path) -> None:
    """Directories a killed attempt left half-written: never resumed from, never reported."""
    if root.is_dir():
        for d in root.iterdir():
            if d.is_dir() and d.name.startswith(PARTIAL_PREFIX):
                shutil.rmtree(d, ignore_errors=True)


def seal(ckpt_dir: Path, position: dict[str, Any]) -> None:
    """Mark ``ckpt_dir`` resumable: its position plus every file's size (checked by :func:`complete`)."""
    files = {
        p.relative_to(ckpt_dir).as_posix(): None if p.name == REWRITTEN else p.stat().st_size
        for p in sorted(ckpt_dir.rglob("*"))
        if p.is_file() and p.name != MARKER
    }
    write_json(ckpt_dir / MARKER, {"format": 1, **position, "files": files})


def publish(tmp: Path, final: Path) -> None:
    """Rename a whole checkpoint into place; one of the same name (an earlier attempt's) is replaced."""
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)


def complete(ckpt_dir: Path) -> dict[str, Any] | None:
    """The marker of a whole resumable checkpoint, or None (no marker, unreadable, a file missing or cut)."""
    try:
        marker = json.loads((ckpt_dir / MARKER).read_text())
        files = marker["files"]
        for rel, size in files.items():
            actual = (ckpt_dir / rel).stat().st_size  # a missing file raises
            if size is not None and actual != size:
                return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return marker


def resumable(root: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Whole resumable checkpoints under ``root``, oldest first (by step, then save order)."""
    if not root.is_dir():
        return []
    found = []
    for d in root.iterdir():
        if d.is_dir() and not d.name.startswith(PARTIAL_PREFIX):
            marker = complete(d)
            if marker is not None:
                found.append((d, marker))
    return sorted(found, key=lambda dm: (int(dm[1].get("step", 0)), int(dm[1].get("saved", 0))))


def latest(root: Path) -> tuple[Path, dict[str, Any]] | None:
    found = resumable(root)
    return found[-1] if found else None


def prune_states(root: Path, state_files: Iterable[str]) -> None:
    """Keep the training state (optimizer etc.) of the newest KEEP_STATES checkpoints; weights stay."""
    for d, _marker in resumable(root)[:-KEEP_STATES]:
        (d / MARKER).unlink(missing_ok=True)  # first: a kill in between leaves it plainly not resumable
        for name in state_files:
            (d / name).unlink(missing_ok=True)


def drop_after(root: Path, step: int, keep: Iterable[str]) -> None:
    """On resume: checkpoint directories the earlier attempt wrote past the resume point (not in ``keep``)."""
    keep = set(keep)
    for d in root.iterdir() if root.is_dir() else []:
        meta = d / "sift_checkpoint.json"
        if not d.is_dir() or d.name in keep or not meta.exists():
            continue
        try:
            later = int(json.loads(meta.read_text()).get("step", 0)) > step or not complete(d)
        except (OSError, ValueError):
            later = True
        if later and d.name != "final":
            shutil.rmtree(d, ignore_errors=True)


def write_index(root: Path, checkpoints: list[dict[str, Any]]) -> None:
    write_json(
        root / INDEX,
        {"format": 1, "checkpoints": [{"id": c["id"], "name": c["name"], "step": c["step"]} for c in checkpoints]},
    )


def resumed(ckpt_dir: Path, marker: dict[str, Any], **fields: Any) -> None:
    """The ``resumed`` event: the job's log says where the restarted job picked up."""
    emit("resumed", checkpoint=ckpt_dir.name, step=int(marker.get("step", 0)), path=str(ckpt_dir), **fields)


def after_checkpoint(saved: int) -> None:
    """Tests only (``SIFT_KILL_AFTER_CHECKPOINTS``): die like an interrupted spot instance, no cleanup."""
    limit = os.environ.get(KILL_AFTER_ENV)
    if limit and saved >= int(limit):
        os.kill(os.getpid(), signal.SIGKILL)


def rng_state() -> dict[str, Any]:
    """Every random generator training draws from (python, numpy, torch CPU and CUDA)."""
    import random

    import numpy as np
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    import random

    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
