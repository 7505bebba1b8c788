#!/bin/sh
# Starts vLLM for the configured base model with LoRA enabled and prefix caching
# (prompt caching: cache reads/writes are reported by the gateway).
# Structured outputs and tool calls: the gateway sends every constraint as `response_format`
# json_schema/json_object (tools are written into the prompt and their calls are such a schema),
# so vLLM's default structured-outputs backend (auto: xgrammar, which expresses every schema the
# gateway accepts) is what runs, and vLLM's own tool parsing (--enable-auto-tool-choice,
# --tool-call-parser) is not used: the gateway never sends `tools` upstream.
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
