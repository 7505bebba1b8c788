"""The SageMaker training directory contract (/opt/ml/...), every path overridable."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


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
    def from_env(cls, env: dict[str, str] | None = None) -> JobPaths:
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
            checkpoints_dir=Path(
                env.get("SM_CHECKPOINT_DIR") or env.get("SIFT_CHECKPOINT_DIR") or root / "checkpoints"
            ),
            output_dir=output_dir,
            output_data_dir=Path(env.get("SM_OUTPUT_DATA_DIR") or output_dir / "data"),
            failure_file=Path(env.get("SM_OUTPUT_FAILURE") or output_dir / "failure"),
        )

    def channel(self, name: str, env: dict[str, str] | None = None) -> Path:
        env = dict(os.environ if env is None else env)
        return Path(env.get(f"SM_CHANNEL_{name.upper()}") or self.input_data / name)
