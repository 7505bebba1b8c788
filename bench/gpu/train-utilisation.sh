#!/usr/bin/env bash
# GPU utilisation of a full DeBERTa-v3-base-sized GLiNER2 fine-tune on 1,000 wnut17 rows, and the mini
# model's F1 fp32 vs mixed precision (issue #29 row 11). Arguments go to train_utilisation.py, e.g.
#   bash bench/gpu/train-utilisation.sh                                   # the measurement, on a GPU
#   bash bench/gpu/train-utilisation.sh --size tiny --rows 40 --max-steps 4   # a CPU check of the script
# PYTHON: an interpreter with the trainer's requirements (containers/training/requirements*.txt);
# SIFT_SHARED_DATA: the folder holding wnut17/ (default /work/shared/data, then shared/data).
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON="${PYTHON:-}"
if [ -z "$PYTHON" ]; then
  if [ -x /root/.cache/sift/venv/bin/python ]; then PYTHON=/root/.cache/sift/venv/bin/python; else PYTHON=python3; fi
fi
"$PYTHON" -c 'import torch, gliner2; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.get_device_name() if torch.cuda.is_available() else None, "gliner2", gliner2.__version__)' \
  || { echo "$PYTHON lacks torch or gliner2: install containers/training/requirements.txt" >&2; exit 2; }
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec "$PYTHON" bench/gpu/train_utilisation.py "$@"
