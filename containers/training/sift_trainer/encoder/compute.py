"""Where and how an encoder job computes: device, precision, micro-batch and data loading.

Why (issue #29 row 11): on an H200 the trainer ran fp32, 8 rows a step, tokenizing in the training loop,
and the GPU averaged 2-4 % busy. Each choice here is a pure function of a :class:`Capabilities` value, so
the CPU tests can describe a GPU; :func:`detect` is the one place that asks torch. On the CPU every
choice is what the trainer did before (fp32, the job's batch, no loader workers), so CPU step times and
results do not move.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from typing import Any

from ..job.hyperparameters import HyperparameterError

PRECISIONS = ("auto", "bf16", "fp16", "fp32")
#: the largest batch chosen from memory when the job does not set one: more rows per optimizer step
#: means fewer steps at the same learning rate, so the automatic batch stays within 4x the default 8
MAX_AUTO_BATCH = 32
#: activation bytes per token per layer in 16-bit, s·h·(34 + 5·a·s/h) (Korthikanti et al. 2022,
#: "Reducing Activation Recomputation in Large Transformer Models", section 4.1), doubled: DeBERTa's
#: relative-position attention and gliner2's span heads keep more than a plain transformer layer
ACTIVATION_MARGIN = 2.0
#: GPU memory left for the CUDA context, the allocator's fragmentation and the evaluation batches
RESERVE_FRACTION = 0.15
#: DataLoader workers on a GPU (tokenization and collation off the training loop; gliner2's default)
GPU_LOADER_WORKERS = 4


@dataclass(frozen=True)
class Capabilities:
    """What the trainer can compute on: ``device`` "cuda" or "cpu"; memory in bytes (cuda only)."""

    device: str
    bf16: bool = False
    free_bytes: int = 0
    total_bytes: int = 0
    name: str = "cpu"
    cpu_count: int = 1


@dataclass(frozen=True)
class Compute:
    device: str
    precision: str  # bf16 | fp16 | fp32
    #: rows per optimizer step (the job's batch_size, or the automatic one) = micro_batch x accumulation
    batch_size: int
    micro_batch_size: int
    gradient_accumulation_steps: int
    num_workers: int
    pin_memory: bool
    device_name: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def trainer_config(self) -> dict[str, Any]:
        """gliner2 TrainingConfig fields (gliner2 runs the autocast, the fp16 GradScaler and the accumulation)."""
        return {
            "batch_size": self.micro_batch_size,
            "gradient_accumulation_steps": self.gradient_accumulation_steps,
            "fp16": self.precision == "fp16",
            "bf16": self.precision == "bf16",
            "eval_batch_size": self.micro_batch_size if self.device == "cuda" else 8,
            "num_workers": self.num_workers,
            "pin_memory": self.pin_memory,
        }


def detect() -> Capabilities:
    import torch

    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    if not torch.cuda.is_available():
        return Capabilities(device="cpu", cpu_count=cpus)
    free, total = torch.cuda.mem_get_info()
    return Capabilities(
        device="cuda",
        bf16=bool(torch.cuda.is_bf16_supported()),
        free_bytes=int(free),
        total_bytes=int(total),
        name=torch.cuda.get_device_name(),
        cpu_count=cpus,
    )


def requested_precision(extra: dict[str, Any]) -> str:
    """The job's ``precision`` hyperparameter (auto when unset); ``bf16: true|false`` is its older spelling."""
    if "precision" in extra:
        value = str(extra["precision"]).lower()
    elif "bf16" in extra:
        value = "bf16" if extra["bf16"] else "fp32"
    else:
        value = "auto"
    if value not in PRECISIONS:
        raise HyperparameterError(f"precision must be one of {', '.join(PRECISIONS)}, got {extra.get('precision')!r}")
    return value


def precision(caps: Capabilities, requested: str = "auto") -> str:
    """bf16 autocast where the GPU has it, else fp16 (gliner2 adds the loss scaler); always fp32 on the CPU
    (autocast there is slower, and gliner2 turns it off). ``requested`` fp32 opts a GPU job out; bf16 on a
    GPU without it falls back to fp16 rather than failing a job that is already billed."""
    if caps.device != "cuda" or requested == "fp32":
        return "fp32"
    if requested == "fp16" or not caps.bf16:
        return "fp16"
    return "bf16"


def memory_batch(
    caps: Capabilities,
    *,
    parameters: int,
    trainable: int,
    hidden: int,
    layers: int,
    heads: int,
    tokens: int,
    precision: str,
) -> int:
    """Rows one forward/backward pass fits in the GPU's free memory, at most MAX_AUTO_BATCH (1 on the CPU:
    unused there). Weights are fp32 under autocast; trainable ones add a gradient and AdamW's two moments."""
    if caps.device != "cuda":
        return 1
    state = 4 * parameters + 12 * trainable
    width = 2 if precision in ("bf16", "fp16") else 4
    per_row = ACTIVATION_MARGIN * layers * tokens * hidden * (34 + 5 * heads * tokens / hidden) * width / 2
    usable = caps.free_bytes - state - RESERVE_FRACTION * caps.total_bytes
    return max(1, min(MAX_AUTO_BATCH, int(usable // per_row)))


def plan(
    caps: Capabilities,
    *,
    requested_batch: int | None,
    default_batch: int,
    fits: int,
    precision: str,
    workers: int | None = None,
) -> Compute:
    """``requested_batch``: the job's batch_size (rows per optimizer step, kept exactly: on a GPU that fits
    fewer rows the step accumulates micro-batches); None: the GPU's ``fits`` (``memory_batch``), the CPU's
    ``default_batch``. ``workers``: DataLoader workers (None: GPU_LOADER_WORKERS on a GPU; none on the CPU,
    where the workers take cores from the model: mini model, 2 cores, 2 workers 5.7-5.9 s/step vs 4.2-5.0)."""
    gpu = caps.device == "cuda"
    if requested_batch is None:
        batch = fits if gpu else default_batch
        micro = batch
    else:
        batch = requested_batch
        # the largest micro-batch that fits and divides the batch: micro x accumulation == batch exactly
        micro = max(d for d in range(1, min(batch, fits if gpu else batch) + 1) if batch % d == 0)
    return Compute(
        device=caps.device,
        precision=precision,
        batch_size=batch,
        micro_batch_size=micro,
        gradient_accumulation_steps=math.ceil(batch / micro),
        num_workers=(min(GPU_LOADER_WORKERS, max(0, caps.cpu_count - 1)) if gpu else 0) if workers is None else workers,
        pin_memory=gpu,
        device_name=caps.name,
    )


def for_model(
    caps: Capabilities, model, *, extra: dict[str, Any], requested_batch: int | None, default_batch: int, lora: bool
) -> Compute:
    """The plan for ``model`` (a GLiNER2 span model) from its encoder's config and the device."""
    chosen = precision(caps, requested_precision(extra))
    workers = extra.get("loader_workers")
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 0):
        raise HyperparameterError(f"loader_workers must be an integer >= 0, got {workers!r}")
    fits = 1
    if caps.device == "cuda":
        cfg = model.encoder.config
        total = sum(p.numel() for p in model.parameters())
        fits = memory_batch(
            caps,
            parameters=total,
            # LoRA trains adapters (a few % of the weights): counting the heads' and 5 % of the encoder's is ample
            trainable=total // 20 if lora else total,
            hidden=int(cfg.hidden_size),
            layers=int(cfg.num_hidden_layers),
            heads=int(cfg.num_attention_heads),
            tokens=int(getattr(cfg, "max_position_embeddings", 512) or 512),
            precision=chosen,
        )
    return plan(
        caps, requested_batch=requested_batch, default_batch=default_batch, fits=fits, precision=chosen, workers=workers
    )
