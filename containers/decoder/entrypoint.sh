#!/bin/sh
# Starts vLLM for the configured base model with LoRA enabled and prefix caching
# (prompt caching: cache reads/writes are reported by the gateway).
set -eu
# Idle keep-alive above the ALB's idle timeout, or the ALB reuses connections uvicorn has closed
# (502s). The stack passes the number (src/http/keepAlive.ts); vLLM hands this variable to uvicorn.
export VLLM_HTTP_TIMEOUT_KEEP_ALIVE="${SIFT_KEEP_ALIVE_SECONDS:?SIFT_KEEP_ALIVE_SECONDS (seconds, above the load balancer idle timeout) is required}"
exec python3 -m vllm.entrypoints.openai.api_server \
  --host 0.0.0.0 --port 8000 \
  --model "${SIFT_DECODER_MODEL}" \
  --enable-lora --max-loras "${SIFT_MAX_LORAS}" --max-lora-rank 64 \
  --enable-prefix-caching \
  --max-model-len "${SIFT_MAX_MODEL_LEN}" \
  --gpu-memory-utilization 0.90 \
  "$@"
