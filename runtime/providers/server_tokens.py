"""What an OpenAI-compatible server can say about its model's context: its size, and how many
tokens a prompt is, counted by the server's own tokenizer.

The chat-completions API has neither, but the common local servers do, each its own way:

- llama.cpp's ``llama-server``: ``GET /props`` holds the context size (``n_ctx``, at the top or
  in ``default_generation_settings``), and ``POST /tokenize`` ``{"content": ...}`` answers
  ``{"tokens": [...]}``;
- llama-cpp-python's server: ``POST /extras/tokenize/count`` ``{"input": ..., "model": ...}``
  answers ``{"count": n}``;
- vLLM: ``GET /v1/models`` lists each model's ``max_model_len``;
- Ollama: ``POST /api/show`` ``{"model": ...}`` lists the parameters the model runs with, among
  them ``num_ctx`` when it is set (Ollama's own default is not reported there; Ollama shortens
  an overlong prompt instead of refusing it).

Only a server on this computer or the local network is asked (a loopback or private address, or
a host name without a dot): hosted APIs report an overflow as an error, and need not be sent
requests they do not know. The context size is asked once per turn (a provider serves one turn),
the tokenizer once per model step, each with a short timeout, and a cancelled turn stops waiting
at once; a way of counting that fails is not tried again in the turn, and a server that lets a
question time out is asked nothing more in it. When nothing
answers, the caller falls back to ``token_estimate``. The text counted is what a chat template
renders, roughly: every message's role and content, the tool calls' arguments and the tools'
schemas, plus a few tokens a message for the template's markers, so the count errs slightly
high.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import json
import socket
import ssl
import threading
from typing import Any
from urllib.parse import urlsplit

from runtime.base.cancel_token import CancelToken

PROBE_TIMEOUT = 5.0
TOKENS_PER_MESSAGE = 8
"""What a chat template adds around each message (role markers, separators): a generous guess."""


def prompt_text(body: dict[str, Any]) -> tuple[str, int]:
    """The text of a request body as a chat template renders it (roughly), and its number of
    messages."""
    parts: list[str] = []
    messages = body.get("messages") or []
    for message in messages:
        parts.append(str(message.get("role", "")))
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            parts.append(str(function.get("name", "")))
            parts.append(str(function.get("arguments", "")))
    if body.get("tools"):
        parts.append(json.dumps(body["tools"], ensure_ascii=False))
    return "\n".join(parts), len(messages)


class ServerTokens:
    """The server's context size and token counts, each asked for once, remembered after."""

    def __init__(self, base_url: str, model: str, api_key: str | None, timeout: float) -> None:
        self._parts = urlsplit(base_url)
        self._api_path = self._parts.path.rstrip("/")
        root = self._api_path
        if root.endswith("/v1"):
            root = root[: -len("/v1")]
        self._root = root
        self._model = model
        self._api_key = api_key
        self._timeout = min(timeout, PROBE_TIMEOUT)
        self._context: int | None = None
        self._context_asked = False
        self._cancel = CancelToken()
        self._counter: str | None = None  # "llama.cpp", "llama-cpp-python", or "" for none
        self._silent = not is_local_host(self._parts.hostname or "")
        """Nothing more is asked: a hosted API, or a server that let a question time out."""
        self.counted_by_server = False
        """Whether the last ``count`` came from the server's tokenizer."""

    def context_tokens(self, cancel: CancelToken) -> int | None:
        """The context size the server reports, or None."""
        if not self._context_asked:
            self._context_asked = True
            self._cancel = cancel
            self._context = self._ask_context()
        return self._context

    def count(self, body: dict[str, Any], cancel: CancelToken) -> int | None:
        """The prompt's tokens as the server counts them (with the template's markers), or None
        when the server cannot count."""
        self._cancel = cancel
        if self._silent:
            return None
        text, messages = prompt_text(body)
        self.counted_by_server = False
        tokens: int | None = None
        if self._counter in (None, "llama.cpp"):
            tokens = self._llama_cpp_count(text)
            self._counter = "llama.cpp" if tokens is not None else None
        if tokens is None and self._counter in (None, "llama-cpp-python"):
            tokens = self._llama_cpp_python_count(text)
            self._counter = "llama-cpp-python" if tokens is not None else ""
        if tokens is None:
            return None
        self.counted_by_server = True
        return tokens + TOKENS_PER_MESSAGE * messages

    # ---- the servers' own ways ----------------------------------------------------------------

    def _ask_context(self) -> int | None:
        props = self._request("GET", f"{self._root}/props")
        if isinstance(props, dict):
            for holder in (props, props.get("default_generation_settings")):
                if isinstance(holder, dict) and _positive(holder.get("n_ctx")):
                    return int(holder["n_ctx"])
        models = self._request("GET", f"{self._api_path}/models")
        if isinstance(models, dict) and isinstance(models.get("data"), list):
            for entry in models["data"]:
                if (
                    isinstance(entry, dict)
                    and entry.get("id") == self._model
                    and _positive(entry.get("max_model_len"))
                ):
                    return int(entry["max_model_len"])
        shown = self._request("POST", f"{self._root}/api/show", {"model": self._model})
        if isinstance(shown, dict) and isinstance(shown.get("parameters"), str):
            for line in shown["parameters"].splitlines():
                words = line.split()
                if len(words) == 2 and words[0] == "num_ctx" and words[1].isdigit():
                    return int(words[1]) or None
        return None

    def _llama_cpp_count(self, text: str) -> int | None:
        answer = self._request("POST", f"{self._root}/tokenize", {"content": text})
        if isinstance(answer, dict) and isinstance(answer.get("tokens"), list):
            return len(answer["tokens"])
        return None

    def _llama_cpp_python_count(self, text: str) -> int | None:
        body = {"input": text, "model": self._model}
        answer = self._request("POST", f"{self._root}/extras/tokenize/count", body)
        if isinstance(answer, dict) and _positive(answer.get("count")):
            return int(answer["count"])
        return None

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        """The JSON a 200 answer holds, or None for anything else (never raises)."""
        if self._silent or self._cancel.is_cancelled():
            return None
        host = self._parts.hostname or ""
        connection: http.client.HTTPConnection
        if self._parts.scheme == "https":
            context = ssl.create_default_context()
            connection = http.client.HTTPSConnection(
                host, self._parts.port, timeout=self._timeout, context=context
            )
        else:
            connection = http.client.HTTPConnection(host, self._parts.port, timeout=self._timeout)
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        sock: list[socket.socket] = []

        def abort() -> None:
            for held in sock:
                with contextlib.suppress(OSError):
                    held.shutdown(socket.SHUT_RDWR)

        # The whole question is bounded, not only each read: a server that trickles its
        # answer a byte at a time would otherwise hold the turn forever.
        expired = threading.Event()

        def out_of_time() -> None:
            expired.set()
            abort()

        whole = threading.Timer(self._timeout * 2, out_of_time)
        whole.daemon = True
        unregister = self._cancel.on_cancel(abort)
        whole.start()
        try:
            connection.connect()
            if connection.sock is not None:
                sock.append(connection.sock)
            if self._cancel.is_cancelled():
                return None
            connection.request(method, path or "/", body=data, headers=headers)
            response = connection.getresponse()
            if response.status != 200:
                response.read(64 * 1024)
                return None
            return json.loads(response.read(16 * 1024 * 1024))
        except TimeoutError:
            self._silent = True
            return None
        except (OSError, http.client.HTTPException, ValueError):
            if expired.is_set():
                self._silent = True  # it let the question run out of time: asked nothing more
            return None
        finally:
            whole.cancel()
            unregister()
            with contextlib.suppress(Exception):
                connection.close()


def is_local_host(host: str) -> bool:
    """A host on this computer or the local network: a loopback, private or link-local address,
    ``localhost``, or a name without a dot."""
    if host == "localhost" or host.endswith(".localhost") or ("." not in host and ":" not in host):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host.endswith((".local", ".lan", ".internal", ".home.arpa"))
    return address.is_loopback or address.is_private or address.is_link_local


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
