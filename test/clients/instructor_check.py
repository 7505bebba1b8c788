"""instructor (Python) as users write it, run by test/clients/instructor.test.ts against the local server.

Usage: instructor_check.py BASE_URL API_KEY MODEL
Asks for one `Landmark` twice: as is (the grammar constrains the tool call), then with the test-only
header that drops the constraint. Prints one JSON line per run: {"ok": true, "object": {...}} when
instructor returned an object that validates, else {"ok": false, "error": <exception class>, "message"}.
"""

import json
import sys
from typing import Literal

import instructor
from instructor.core import InstructorError
from openai import APIError, OpenAI
from pydantic import BaseModel, ValidationError


class Landmark(BaseModel):
    city: Literal["Paris", "Rome", "Tokyo"]
    country: Literal["FR", "IT", "JP"]
    unesco_site: bool


def ask(base_url: str, api_key: str, model: str, headers: dict[str, str]) -> dict:
    # instructor's default mode (Mode.TOOLS): one tool named Landmark, forced by an object tool_choice
    client = instructor.from_openai(OpenAI(base_url=base_url, api_key=api_key, max_retries=0, default_headers=headers))
    try:
        got = client.chat.completions.create(
            model=model,
            response_model=Landmark,
            messages=[{"role": "user", "content": "Where is the Eiffel Tower?"}],
            max_retries=0,  # one attempt: no re-ask with the validation error
            temperature=0,
            seed=7,
            max_tokens=100,
        )
    except (InstructorError, ValidationError, APIError) as err:  # what the client raises, reported
        return {"ok": False, "error": type(err).__name__, "message": str(err)[:500]}
    return {"ok": True, "object": Landmark.model_validate(got.model_dump()).model_dump()}


def main() -> None:
    base_url, api_key, model = sys.argv[1:4]
    for headers in ({}, {"x-sift-test-unconstrained": "1"}):
        print(json.dumps(ask(base_url, api_key, model, headers)), flush=True)


if __name__ == "__main__":
    main()
