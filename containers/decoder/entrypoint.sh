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

# Base weights: the checkpoint `sift models publish` put in the model bucket (the dequantized one
# training loads from the same prefix), never the Hugging Face hub — an HF outage or a VPC without
# egress must not crash-loop the service, and LoRAs must meet the base weights they were trained on.
export HF_HUB_OFFLINE=1
bucket="${SIFT_BUCKET:?SIFT_BUCKET (the model bucket) is required}"
model="${SIFT_DECODER_MODEL:?SIFT_DECODER_MODEL (the catalog id vLLM serves) is required}"
prefix="${SIFT_DECODER_MODEL_PREFIX:-models/${model}/}"
dir="${SIFT_DECODER_MODEL_DIR:?SIFT_DECODER_MODEL_DIR (where the weights are copied) is required}"
# the GGUF beside the checkpoint is llama.cpp's (local mode); vLLM loads config.json + *.safetensors
aws s3 sync "s3://${bucket}/${prefix}" "${dir}" --only-show-errors --exclude '*.gguf'
# The publisher writes manifest.json last, and S3 lists a written object at once ("Amazon S3 data
# consistency model": strong read-after-write), so with the manifest here the copy is whole.
missing=""
for f in manifest.json config.json tokenizer.json; do
  [ -f "${dir}/${f}" ] || missing="${missing} ${f}"
done
ls "${dir}"/*.safetensors >/dev/null 2>&1 || missing="${missing} *.safetensors"
if [ -n "${missing}" ]; then
  echo "sift-decoder: no servable copy of ${model} at s3://${bucket}/${prefix} (missing:${missing}); publish it with \`sift models publish ${model} --bucket ${bucket}\`" >&2
  exit 1
fi

# The checkpoint is fp32; vLLM's `--dtype auto` runs fp32 models in FP16 ("Engine Arguments",
# https://docs.vllm.ai/en/latest/configuration/engine_args.html): the same weights, rounded.
exec python3 -m vllm.entrypoints.openai.api_server \
  --host 0.0.0.0 --port 8000 \
  --model "${dir}" \
  --served-model-name "${model}" \
  --enable-lora --max-loras "${SIFT_MAX_LORAS}" --max-lora-rank 64 \
  --enable-prefix-caching \
  --max-model-len "${SIFT_MAX_MODEL_LEN}" \
  --gpu-memory-utilization 0.90 \
  "$@"
