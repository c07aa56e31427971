"""Canonical bytes (RFC 8785), ``canonicalArgsHash``, ``operationId`` and the immutable prefix
digest (docs/design/ledger.md section 2).

``canonical_bytes`` takes a fast path through the standard library's C JSON encoder, whose output
equals RFC 8785 exactly when the value holds no float and no object key with a character at or
above U+E000 (the only place where UTF-16 and code-point key order differ). Everything else goes
through the ``rfc8785`` package. A property test proves the two paths agree.
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
import struct
from collections.abc import Iterable, Mapping
from typing import Any

import rfc8785

from runtime.ledger.event_model import MAX_SAFE_INTEGER, RuntimeEvent
from runtime.ledger.ledger_errors import CanonicalEncodeError

# The C encoder of the standard library, built once: ``json.JSONEncoder.encode`` would build it
# again on every call, which costs more than encoding a small event. No cycle detection is
# needed: values decoded from JSON are trees, and ``_needs_exact_encoder`` walks them first.
_C_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)
_C_STRINGS: Any = getattr(json.encoder, "c_encode_basestring", None)
_ENCODER: Any = (
    _C_ENCODER(None, None, _C_STRINGS, None, ":", ",", True, False, False)
    if _C_ENCODER is not None and _C_STRINGS is not None
    else None
)
_SLOW_FAST = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False
).encode


def _fast(value: Any) -> str:
    if _ENCODER is None:
        return _SLOW_FAST(value)
    return "".join(_ENCODER(value, 0))


PREFIX_DOMAIN = b"maka.runtime-prefix.v1"
_KEY_LIMIT = "\ue000"


# C901: a hot iterative walk, one branch per JSON type, kept inline for speed.
def _needs_exact_encoder(value: Any) -> bool:  # noqa: C901
    """True when the fast encoder might differ from RFC 8785 (or must refuse the value).

    Exact types only (``type(x) is str``): subclasses such as enums take the exact path. Scalars
    are checked where they are found instead of being pushed, which keeps the walk cheap.
    """
    stack = [value]
    pop, push = stack.pop, stack.append
    while stack:
        item = pop()
        kind = type(item)
        if kind is dict:
            for key, child in item.items():
                if type(key) is not str or (not key.isascii() and max(key) >= _KEY_LIMIT):
                    return True
                child_kind = type(child)
                if child_kind is str or child_kind is bool or child is None:
                    continue
                if child_kind is int:
                    if not -MAX_SAFE_INTEGER <= child <= MAX_SAFE_INTEGER:
                        return True
                    continue
                push(child)
        elif kind is list:
            for child in item:
                child_kind = type(child)
                if child_kind is str or child_kind is bool or child is None:
                    continue
                if child_kind is int:
                    if not -MAX_SAFE_INTEGER <= child <= MAX_SAFE_INTEGER:
                        return True
                    continue
                push(child)
        elif kind is str or kind is bool or item is None:
            continue
        elif kind is int:
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                return True
        else:
            return True  # floats and anything that is not plain JSON
    return False


def plain_canonical_json_bytes(value: Any) -> bytes | None:
    """The canonical bytes of ``value`` when plain JSON (sorted keys, no spaces, no ASCII
    escaping) already is RFC 8785 for it (no float, no unsafe integer, no key at or above
    U+E000), else None. A caller that gets bytes here knows they equal both encodings, so it
    needs no second encoding to compare them. Refuses lone surrogates like
    ``canonical_json_bytes``."""
    if _needs_exact_encoder(value):
        return None
    try:
        return _fast(value).encode("utf-8")
    except UnicodeEncodeError as error:
        raise CanonicalEncodeError("string contains a lone surrogate") from error


def canonical_line_bytes(line: bytes, value: Any) -> bytes:
    """The canonical bytes of ``value``, which was decoded from the JSON text ``line``: ``line``
    itself when it already is canonical (the same bytes object, so an import keeps one copy).

    The proof is ``plain_canonical_json_bytes``: the walk that shows plain JSON is RFC 8785 for
    ``value`` and one plain encoding. (A regular-expression search of ``line`` for float and
    long-integer tokens was tried instead of the walk: on export lines of a few hundred bytes
    it cost 10-25 us against 2 us for the walk.)"""
    plain = plain_canonical_json_bytes(value)
    if plain is None:
        return _exact_canonical_bytes(value)
    return line if plain == line else plain


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _DuplicateKey(key)
        found[key] = value
    return found


def duplicate_key(line: bytes) -> str | None:
    """A key that appears twice in one object of the JSON text ``line`` (the first found), or
    None. Decoders keep the last value of such a key, so the value a line stands for would
    depend on its reader: a canonical line never repeats one, and a line that is not canonical
    is checked with this before its value is taken (the slow path: a Python parse)."""
    try:
        json.loads(line, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as duplicate:
        return duplicate.key
    except (ValueError, RecursionError):  # the decoder that read it already said what it is
        return None
    return None


def canonical_json_bytes(value: Any) -> bytes:
    """RFC 8785 bytes of any JSON value; refuses what canonical JSON cannot carry."""
    plain = plain_canonical_json_bytes(value)
    if plain is not None:
        return plain
    return _exact_canonical_bytes(value)


def _exact_canonical_bytes(value: Any) -> bytes:
    """RFC 8785 through the ``rfc8785`` package (values plain JSON cannot encode exactly)."""
    _refuse_unsafe(value)
    try:
        encoded: bytes = rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError, UnicodeError) as error:
        raise CanonicalEncodeError(f"not losslessly serialisable: {error}") from error
    return encoded


def _refuse_unsafe(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, bool):
            continue
        if isinstance(item, int) and not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
            raise CanonicalEncodeError("integer outside +-(2^53-1)")
        if isinstance(item, dict):
            for key in item:
                if not isinstance(key, str):
                    raise CanonicalEncodeError("object keys must be strings")
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def canonical_bytes(event: RuntimeEvent) -> bytes:
    """The bytes the store persists for ``event``."""
    return canonical_json_bytes(event)


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical_args_hash(tool_name: str, args: Any) -> str:
    """``sha256:`` over the canonical bytes of ``{"args": ARGS, "toolName": NAME}``."""
    if not tool_name:
        raise CanonicalEncodeError("tool argument identity requires a tool name")
    return sha256_digest(canonical_json_bytes({"args": args, "toolName": tool_name}))


def operation_id(invocation_id: str, provider_tool_call_id: str) -> str:
    """``toolop_`` + 32 hex chars of SHA-256 over ``[invocationId, providerToolCallId]``."""
    if not invocation_id or not provider_tool_call_id:
        raise CanonicalEncodeError("an operation id needs an invocation id and a tool-call id")
    digest = hashlib.sha256(canonical_json_bytes([invocation_id, provider_tool_call_id]))
    return "toolop_" + digest.hexdigest()[:32]


def _length_prefixed(data: bytes) -> bytes:
    return struct.pack(">Q", len(data)) + data


def prefix_digest(identity: Mapping[str, str], rows: Iterable[tuple[int, bytes]]) -> str:
    """Immutable prefix digest over ``(event_seq, canonical bytes)`` rows of one run.

    ``identity`` holds ``sessionId``, ``invocationId``, ``runId`` and ``turnId``. Rows must be
    the run's events 1..n in order; partial events never belong to a prefix (callers check).
    """
    identity_value = {
        key: identity[key] for key in ("sessionId", "invocationId", "runId", "turnId")
    }
    hasher = hashlib.sha256()
    hasher.update(_length_prefixed(PREFIX_DOMAIN))
    hasher.update(_length_prefixed(canonical_json_bytes(identity_value)))
    expected = 1
    for seq, payload in rows:
        if seq != expected:
            raise CanonicalEncodeError(f"event_seq gap: expected {expected}, found {seq}")
        expected += 1
        hasher.update(struct.pack(">Q", seq))
        hasher.update(_length_prefixed(payload))
    return "sha256:" + hasher.hexdigest()


def deeper_than(value: object, limit: int) -> bool:
    """``value`` (decoded JSON) nests arrays and objects more than ``limit`` levels deep,
    walked without recursion (a hostile file's nesting never reaches Python's stack)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict | list):
            continue
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False
