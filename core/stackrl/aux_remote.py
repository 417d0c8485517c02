"""A client of an OpenAI-compatible server (OpenAI, vLLM's and SGLang's servers, llama.cpp, ...): one completion
per prompt, with a time limit per request, retries with backoff and a bound on the requests in flight.

It speaks the two endpoints every such server has, ``/chat/completions`` and ``/completions``, through ``httpx2``
(the HTTP client the model hub's own library already brings), not the ``openai`` package: one POST and one JSON
field read are all a judgement needs, and the package would add its own retries, which would hide the failures
this client counts.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from stackrl.errors import ConfigError, StackrlError

# Replies worth another try: the server is busy or failed, not the request.
_RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


@dataclass
class Reply:
    """One request's outcome: the text, or ``None`` and why it failed."""

    text: str | None
    error: str = ""


class RemoteModel:
    """Completions from ``base_url`` for model ``model``; ``section`` is an ``aux_models`` entry (backend openai)
    and ``key`` its config key, named in errors."""

    def __init__(self, section, key: str):
        try:
            import httpx2
        except ImportError:
            raise ConfigError(f"{key}.backend openai needs httpx2: pip install 'stackrl[openai]'") from None

        self.section, self.key = section, key
        headers = {"Content-Type": "application/json"}
        if section.api_key_env:
            api_key = os.environ.get(section.api_key_env)
            if not api_key:
                raise ConfigError(f"{key}.api_key_env: the environment variable {section.api_key_env} is not set")
            headers["Authorization"] = f"Bearer {api_key}"
        self._http = httpx2
        self._client = httpx2.Client(
            base_url=section.base_url.rstrip("/") + "/", headers=headers, timeout=section.timeout_s,
        )

    def complete(self, prompts: list, sampling: dict) -> list[Reply]:
        """One reply per prompt (text or chat messages), ``concurrency`` requests at a time, in order."""
        if not prompts:
            return []
        with ThreadPoolExecutor(max_workers=min(self.section.concurrency, len(prompts))) as pool:
            return list(pool.map(lambda prompt: self._one(prompt, sampling), prompts))

    def _body(self, prompt, sampling: dict) -> tuple[str, dict]:
        if isinstance(prompt, list) and prompt and not isinstance(prompt[0], dict):
            raise StackrlError(f"{self.key}: a server model takes text or chat messages, not token ids")
        body = {"model": self.section.model, "n": 1}
        for ours, theirs in (("max_new_tokens", "max_tokens"), ("temperature", "temperature"), ("top_p", "top_p"),
                             ("seed", "seed"), ("stop", "stop")):
            if ours in sampling:
                body[theirs] = sampling[ours]
        if sampling.get("do_sample") is False:
            body["temperature"] = 0.0
        if self.section.api == "completions":
            if not isinstance(prompt, str):
                raise StackrlError(f"{self.key}.api completions takes text prompts; use api: chat for messages")
            return "completions", {**body, "prompt": prompt}
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        return "chat/completions", {**body, "messages": messages}

    def _text(self, payload) -> str:
        """The reply's text; ``ValueError`` when the reply is not a completion."""
        choice = payload["choices"][0]
        text = choice["message"]["content"] if self.section.api == "chat" else choice["text"]
        if not isinstance(text, str):
            raise ValueError(f"the completion's text is {type(text).__name__}, not a string")
        return text

    def _one(self, prompt, sampling: dict) -> Reply:
        path, body = self._body(prompt, sampling)
        error = ""
        for attempt in range(self.section.retries + 1):
            if attempt:
                time.sleep(self.section.backoff_s * 2 ** (attempt - 1))
            try:
                response = self._client.post(path, content=json.dumps(body))
            except self._http.TransportError as exc:  # timeouts and lost connections
                error = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code in _RETRY_STATUS:
                error = f"HTTP {response.status_code}"
                continue
            if response.status_code != 200:
                error = f"HTTP {response.status_code}: {response.text[:200]}"
                break
            try:
                return Reply(self._text(response.json()))
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                error = f"malformed reply ({type(exc).__name__}: {exc}): {response.text[:200]}"
                break
        return Reply(None, error)

    def close(self) -> None:
        self._client.close()
