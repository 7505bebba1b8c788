"""Encoder jobs continue from their newest resumable checkpoint (job/resume.py has the AWS rules).

gliner2's trainer cannot resume: its ``train()`` builds the optimizer and scheduler, sets the step to 0
and loops over epochs. So the train loader is wrapped (:class:`ResumableLoader`). The first time the loop
asks it for batches, the checkpoint's weights, optimizer, scheduler, step and bookkeeping are put back.
Epochs finished before the interruption yield no batches (their evaluation and checkpoint are switched
off meanwhile). The epoch the checkpoint was saved in replays its data order from the RNG state saved at
the epoch's start, skips the batches already trained and takes the checkpoint's RNG state: the run goes
on as if it had not stopped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..job import resume
from . import checkpoint_selection

#: optimizer, scheduler, loss scaler, RNG states and data-sampling counters of a checkpoint
STATE_FILE = "sift_trainer_state.pt"


class Pending:
    """A checkpoint to continue from, until the loop reaches the epoch it was saved in."""

    def __init__(self, ckpt_dir: Path, marker: dict[str, Any], state: dict[str, Any]):
        self.dir, self.marker, self.state = ckpt_dir, marker, state
        self.epoch, self.batches = int(marker["epoch_index"]), int(marker["batches"])
        if self.batches >= int(marker["batches_per_epoch"]):  # saved at an epoch's end: the next one starts
            self.epoch, self.batches = self.epoch + 1, 0
        self.restored = False
        self._config: tuple[str, bool] | None = None

    @classmethod
    def find(cls, root: Path) -> Pending | None:
        """The newest whole resumable checkpoint under ``root``; what the earlier attempt left past it goes."""
        import torch

        resume.clear_partials(root)
        found = resume.latest(root)
        if found is None:
            return None
        ckpt_dir, marker = found
        resume.drop_after(root, int(marker["step"]), [c["name"] for c in marker["checkpoints"]])
        # our own file; it holds numpy RNG state, which the weights-only unpickler refuses
        state = torch.load(ckpt_dir / STATE_FILE, map_location="cpu", weights_only=False)
        return cls(ckpt_dir, marker, state)

    def restore_training(self, trainer) -> None:
        """Weights, optimizer, scheduler, step, early-stopping and checkpoint bookkeeping (the loop has built them)."""
        m, s = self.marker, self.state
        checkpoint_selection.restore_weights(trainer.model, self.dir, adapter=m["kind"] == "adapter")
        trainer.optimizer.load_state_dict(s["optimizer"])
        trainer.scheduler.load_state_dict(s["scheduler"])
        if trainer.scaler is not None and s.get("scaler"):
            trainer.scaler.load_state_dict(s["scaler"])
        trainer.global_step = int(m["step"])
        trainer.best_metric, trainer.patience_counter = s["best_metric"], s["patience_counter"]
        trainer.sift_checkpoints = list(m["checkpoints"])
        trainer.sift_last_eval, trainer.sift_last_eval_step = dict(m["last_eval"]), int(m["last_eval_step"])
        resume.write_index(trainer.output_dir, trainer.sift_checkpoints)
        # finished epochs: no evaluation, no checkpoint, no early stop until the loop is back where it was
        cfg = trainer.config
        self._config = (cfg.eval_strategy, cfg.early_stopping)
        cfg.eval_strategy, cfg.early_stopping = "no", False
        self.restored = True
        resume.resumed(self.dir, m, epoch=self.epoch + 1, skipped_epochs=self.epoch, skipped_batches=self.batches)

    def finish(self, trainer) -> None:
        if self._config is not None:
            trainer.config.eval_strategy, trainer.config.early_stopping = self._config
            self._config = None
        trainer.sift_resume = None


class ResumableLoader:
    """The train loader, counting the batches it hands out in the epoch, and replaying a resumed one."""

    def __init__(self, loader, trainer):
        self.loader, self.trainer, self.batches = loader, trainer, 0

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name: str):  # sampler, dataset, batch_size: the real loader's
        return getattr(self.loader, name)

    def __iter__(self):
        t, pending = self.trainer, self.trainer.sift_resume
        if pending is None:
            t.sift_epoch_rng = resume.rng_state()
            return self._counted(iter(self.loader), 0)
        if not pending.restored:
            pending.restore_training(t)
        if t.epoch < pending.epoch:
            self.batches = 0
            return iter(())
        pending.finish(t)
        s = pending.state
        if pending.batches == 0:
            resume.set_rng_state(s["rng"])
            t.sift_epoch_rng = resume.rng_state()
            it = iter(self.loader)
        else:  # the same order as before the interruption, less the batches already trained
            resume.set_rng_state(s["epoch_rng"])
            t.sift_epoch_rng = s["epoch_rng"]
            it = iter(self.loader)
            for _ in range(pending.batches):
                next(it)
            resume.set_rng_state(s["rng"])
        if s.get("dataset") is not None:
            self.loader.dataset.load_state_dict(s["dataset"])
        return self._counted(it, pending.batches)

    def _counted(self, it, start: int):
        self.batches = start
        for batch in it:
            self.batches += 1
            yield batch


def save_state(trainer, ckpt_dir: Path) -> None:
    """Everything a restarted job needs to continue from ``ckpt_dir`` (its weights are already there)."""
    import torch

    loader: ResumableLoader = trainer.sift_train_loader
    dataset = loader.loader.dataset
    torch.save(
        {
            "optimizer": trainer.optimizer.state_dict(),
            "scheduler": trainer.scheduler.state_dict(),
            "scaler": trainer.scaler.state_dict()
            if trainer.scaler is not None and trainer.scaler.is_enabled()
            else None,
            "rng": resume.rng_state(),
            "epoch_rng": trainer.sift_epoch_rng,
            "dataset": dataset.state_dict() if hasattr(dataset, "state_dict") else None,
            "best_metric": trainer.best_metric,
            "patience_counter": trainer.patience_counter,
        },
        ckpt_dir / STATE_FILE,
    )
    resume.seal(
        ckpt_dir,
        {
            "step": int(trainer.global_step),
            "epoch_index": int(trainer.epoch),
            "batches": loader.batches,
            "batches_per_epoch": len(loader),
            "saved": len(trainer.sift_checkpoints),
            "kind": trainer.sift_checkpoints[-1]["kind"],
            "checkpoints": trainer.sift_checkpoints,
            "last_eval": trainer.sift_last_eval,
            "last_eval_step": trainer.sift_last_eval_step,
        },
    )
