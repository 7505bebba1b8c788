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
# Two pytest workers (pytest-xdist) of one torch thread each: one process with two threads kept the 2 cores
# only ~60 % busy (these models are too small to scale across threads). Measured on 2 cores, the same 128
# tests: 551 s in one process, 351 s in two. SIFT_TRAINER_TEST_WORKERS sets the number of workers.
export SIFT_TORCH_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
SIFT_MINI_MODEL_DIR="$MODELS/sift--gliner2-mini-v1" exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider \
  -n "${SIFT_TRAINER_TEST_WORKERS:-2}" --dist worksteal --durations=15 tests
