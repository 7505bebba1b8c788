"""vLLM LoRA resolver for Sift.

The gateway asks vLLM for model ``jobs/<team>/<job>/model`` (the job's model prefix in the artifacts
bucket, see src/adapters/decoder/openAiUpstream.ts ``loraName``). The first time a vLLM task sees
that name, this resolver copies ``s3://$SIFT_BUCKET/<name>/adapter/`` (the PEFT adapter the trainer
wrote) into ``$SIFT_LORA_CACHE_DIR/<sha of name>/`` — atomically, through a temporary directory —
and hands vLLM a LoRARequest for it. Names that are not a job prefix resolve to nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

NAME = re.compile(r"^jobs/[A-Za-z0-9_-]{1,64}/[0-9a-f-]{36}/model$")


def is_job_adapter(name: str) -> bool:
    return bool(NAME.match(name))


def local_dir(cache_dir: str, name: str) -> Path:
    return Path(cache_dir) / hashlib.sha256(name.encode()).hexdigest()[:32]


def sync_adapter(
    name: str, bucket: str, cache_dir: str, list_keys: Callable[[str], list[str]], download: Callable[[str, str], None]
) -> Path | None:
    """Copies the adapter once; returns its directory, or None when the job has no PEFT adapter."""
    target = local_dir(cache_dir, name)
    if (target / "adapter_config.json").exists():
        return target
    prefix = f"{name}/adapter/"
    keys = [k for k in list_keys(prefix) if not k.endswith("/")]
    if f"{prefix}adapter_config.json" not in keys:
        return None
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=cache_dir, prefix=".part-"))
    try:
        for key in keys:
            rel = key[len(prefix) :]
            if ".." in Path(rel).parts:
                raise ValueError(f"refusing adapter file outside its directory: {key}")
            dest = staging / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            download(key, str(dest))
        try:
            staging.rename(target)
        except OSError:
            if not (target / "adapter_config.json").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _s3(bucket: str) -> tuple[Callable[[str], list[str]], Callable[[str, str], None]]:
    import boto3

    client = boto3.client("s3")

    def list_keys(prefix: str) -> list[str]:
        keys: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys += [o["Key"] for o in page.get("Contents", [])]
        return keys

    return list_keys, lambda key, dest: client.download_file(bucket, key, dest)


def register() -> None:
    """vLLM general-plugin entry point."""
    from vllm.lora.request import LoRARequest
    from vllm.lora.resolver import LoRAResolver, LoRAResolverRegistry

    bucket = os.environ.get("SIFT_BUCKET")
    cache_dir = os.environ.get("SIFT_LORA_CACHE_DIR", "/tmp/sift-lora")
    if not bucket:
        return

    class SiftResolver(LoRAResolver):
        async def resolve_lora(self, base_model_name: str, lora_name: str) -> Any:
            if not is_job_adapter(lora_name):
                return None
            list_keys, download = _s3(bucket)
            path = sync_adapter(lora_name, bucket, cache_dir, list_keys, download)
            if path is None:
                return None
            cfg = json.loads((path / "adapter_config.json").read_text())
            if cfg.get("peft_type") != "LORA":
                return None
            return LoRARequest(
                lora_name=lora_name,
                lora_int_id=int(hashlib.sha256(lora_name.encode()).hexdigest()[:7], 16) + 1,
                lora_path=str(path),
            )

    LoRAResolverRegistry.register_resolver("Sift", SiftResolver())
