"""The Python `openai` SDK (pinned in scripts/requirements-clients.txt) driving Sift's fine-tuning API as a
script written for OpenAI does: only base_url and api_key differ. Run by the training tests against the
local server with the real trainer; each command prints one JSON object that the test asserts on.

Usage:
  openai_fine_tuning_check.py dpo BASE_URL API_KEY MODEL PREFERENCES_JSONL
      upload an OpenAI preference file, create a DPO job (beta 0.1, 2 epochs), cancel a second job
      created behind it, follow the first job's events to `succeeded`, chat as its fine-tuned model
  openai_fine_tuning_check.py follow BASE_URL API_KEY JOB_ID
      read a job that another client created (retrieve, list by cursor pages, events, checkpoints,
      its training file), chat as its fine-tuned model, and hit the error paths a script meets
"""

import json
import sys
import time

from openai import APIStatusError, OpenAI

TERMINAL = ("succeeded", "failed", "cancelled")


def client(base_url: str, api_key: str) -> OpenAI:
    return OpenAI(base_url=base_url, api_key=api_key, max_retries=0)


def wait_processed(openai: OpenAI, file_id: str) -> str:
    for _ in range(240):
        status = openai.files.retrieve(file_id).status
        if status in ("processed", "error"):
            return status
        time.sleep(0.5)
    return "timed out"


def follow_events(openai: OpenAI, job_id: str) -> tuple[object, list[str]]:
    """Polls as OpenAI's docs show: the job's status, and the events that arrived since the last one."""
    seen: list[str] = []
    while True:
        job = openai.fine_tuning.jobs.retrieve(job_id)
        # events come newest first; the first page is enough to find the new ones
        page = openai.fine_tuning.jobs.list_events(job_id, limit=100)
        seen.extend(e.id for e in reversed(page.data) if e.id not in seen)
        if job.status in TERMINAL:
            return job, seen
        time.sleep(1)


def ask(openai: OpenAI, model: str, content: str) -> dict:
    chat = openai.chat.completions.create(
        model=model, max_tokens=12, temperature=0, messages=[{"role": "user", "content": content}]
    )
    return {
        "model": chat.model,
        "content": chat.choices[0].message.content,
        "completion_tokens": chat.usage.completion_tokens if chat.usage else None,
    }


def error_of(call) -> dict:
    """What the SDK raised: its exception class and the OpenAI error fields it parsed."""
    try:
        call()
    except APIStatusError as err:
        return {"error": type(err).__name__, "status": err.status_code, "param": err.param, "code": err.code}
    return {"error": None}


def dpo(base_url: str, api_key: str, model: str, rows_path: str) -> dict:
    openai = client(base_url, api_key)
    with open(rows_path, "rb") as f:
        uploaded = openai.files.create(file=("greetings.jsonl", f), purpose="fine-tune")
    file_status = wait_processed(openai, uploaded.id)
    job = openai.fine_tuning.jobs.create(
        model=model,
        training_file=uploaded.id,
        suffix="greeter",
        method={"type": "dpo", "dpo": {"hyperparameters": {"beta": 0.1, "n_epochs": 2}}},
    )
    # a second job behind it, cancelled at once: it ends cancelled, whether it had started or not
    extra = openai.fine_tuning.jobs.create(model=model, training_file=uploaded.id, method={"type": "dpo"})
    openai.fine_tuning.jobs.cancel(extra.id)
    done, events = follow_events(openai, job.id)
    cancelled = openai.fine_tuning.jobs.retrieve(extra.id)
    while cancelled.status not in TERMINAL:
        time.sleep(0.5)
        cancelled = openai.fine_tuning.jobs.retrieve(extra.id)
    return {
        "file_status": file_status,
        "job_id": job.id,
        "created_status": job.status,
        "status": done.status,
        "error": done.error.model_dump() if done.error else None,
        "method": done.method.model_dump(exclude_none=True) if done.method else None,
        "fine_tuned_model": done.fine_tuned_model,
        "trained_tokens": done.trained_tokens,
        "events": len(events),
        "cancelled": {"id": extra.id, "status": cancelled.status, "fine_tuned_model": cancelled.fine_tuned_model},
        "chat": ask(openai, done.fine_tuned_model, "Greet Maria.") if done.fine_tuned_model else None,
    }


def follow(base_url: str, api_key: str, job_id: str) -> dict:
    openai = client(base_url, api_key)
    job = openai.fine_tuning.jobs.retrieve(job_id)
    listed = [j.id for j in openai.fine_tuning.jobs.list(limit=1)]  # auto-paging: one job per page
    events = [e.message for e in openai.fine_tuning.jobs.list_events(job_id, limit=5)]
    checkpoints = openai.fine_tuning.jobs.checkpoints.list(job_id)
    training_file = openai.files.retrieve(job.training_file)
    content = openai.files.content(job.training_file).text
    models = [m.id for m in openai.models.list()]
    missing = "ftjob-00000000-0000-4000-8000-000000000000"
    return {
        "status": job.status,
        "fine_tuned_model": job.fine_tuned_model,
        "trained_tokens": job.trained_tokens,
        "listed": listed,
        "events": events,
        "checkpoints": [
            {"step_number": c.step_number, "fine_tuned_model_checkpoint": c.fine_tuned_model_checkpoint}
            for c in checkpoints.data
        ],
        "training_file": {
            "status": training_file.status,
            "purpose": training_file.purpose,
            "lines": len(content.splitlines()),
        },
        "in_models": job.fine_tuned_model in models,
        "chat": ask(openai, job.fine_tuned_model, "What is 3 plus 3?"),
        "errors": {
            "unknown_job": error_of(lambda: openai.fine_tuning.jobs.retrieve(missing)),
            "cancel_ended": error_of(lambda: openai.fine_tuning.jobs.cancel(job_id)),
            "unknown_model": error_of(
                lambda: openai.fine_tuning.jobs.create(model="gpt-4o-mini", training_file=job.training_file)
            ),
            "validation_file": error_of(
                lambda: openai.fine_tuning.jobs.create(
                    model=job.model, training_file=job.training_file, validation_file="file-missing"
                )
            ),
            "unknown_file": error_of(
                lambda: openai.fine_tuning.jobs.create(model=job.model, training_file="file-missing")
            ),
            "bad_key": error_of(lambda: client(base_url, "svc_sk_wrong").fine_tuning.jobs.retrieve(job_id)),
        },
    }


def main() -> None:
    command, *args = sys.argv[1:]
    result = dpo(*args) if command == "dpo" else follow(*args)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
