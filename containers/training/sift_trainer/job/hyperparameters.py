"""The job's hyperparameters: SageMaker's string-valued hyperparameters.json, decoded and validated."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .paths import JobPaths


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
    nr_epochs: int | None = None
    learning_rate: float | None = None
    seed: int = 42
    validation_split: float = 0.1
    early_stopping_patience: int = 0  # 0 = off
    rl_config: dict[str, Any] = field(default_factory=dict)
    batch_size: int | None = None
    max_steps: int = -1
    lora_r: int = 16
    lora_alpha: float = 32.0
    max_seq_length: int = 512
    export_onnx: bool = True
    checkpoint_every_steps: int = 0  # 0 = once per epoch
    model_name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Hyperparameters:
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
        errs: list[str] = []
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
        for name in (
            "seed",
            "early_stopping_patience",
            "max_steps",
            "lora_r",
            "max_seq_length",
            "checkpoint_every_steps",
        ):
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
