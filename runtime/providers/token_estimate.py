"""How many tokens a request holds when the server cannot say: an estimate that errs towards
*not* sending.

A request counted above the model's context size is refused before it is sent, because some
servers answer an overflow with an empty stream and nothing else. Counting low is the costly
mistake there (the request goes out, fails, and says little), counting high only refuses a
request that was close to the limit anyway. Common tokenizers spend about four bytes a token on
English prose but far fewer on what an agent's requests mostly hold: JSON (every quote, brace,
colon and escape is a token or close to one), code, numbers and hex digests (digits often split
one by one; a sha256 in a tool result is 40 to 64 tokens), and non-English text (a token for
every one or two bytes of UTF-8). So punctuation and digits count one token each, letters one
token for every three, runs of spaces one for every four, bytes outside ASCII one for every two,
and the whole never less than one token for every three bytes.
"""

from __future__ import annotations

import string

BYTES_PER_TOKEN = 3
"""The floor: never fewer tokens than one for every three bytes."""

_PUNCTUATION = string.punctuation.encode("ascii")
_DIGITS = string.digits.encode("ascii")
_LETTERS = string.ascii_letters.encode("ascii")
_SPACE = b" \t\r\n"
_NON_ASCII = bytes(range(128, 256))


def _count(data: bytes, members: bytes) -> int:
    return len(data) - len(data.translate(None, members))


def _ceil(count: int, per_token: int) -> int:
    return -(-count // per_token)


def estimated_tokens(data: bytes) -> int:
    """A count of ``data``'s tokens that is rarely below what a real tokenizer counts."""
    by_kind = (
        _count(data, _PUNCTUATION)
        + _count(data, _DIGITS)
        + _ceil(_count(data, _LETTERS), 3)
        + _ceil(_count(data, _SPACE), 4)
        + _ceil(_count(data, _NON_ASCII), 2)
    )
    return max(by_kind, _ceil(len(data), BYTES_PER_TOKEN))
