#!/usr/bin/env bash
# The training container's own tests (pytest), on the venv and models that scripts/setup.mjs built.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${SIFT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sift}"
VENV="${SIFT_VENV:-$CACHE/venv}"
MODELS="${SIFT_MODELS_DIR:-$CACHE/models}"
# the decoder image's LoRA resolver (pure parts; vLLM itself is not installed here)
"$VENV/bin/python" -m pytest -q -p no:cacheprovider "$ROOT/containers/decoder/sift_lora/tests"
cd "$ROOT/containers/training"
SIFT_MINI_MODEL_DIR="$MODELS/sift--gliner2-mini-v1" exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider --durations=15 tests
