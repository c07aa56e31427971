"""The shape of a PostgreSQL database URL, checked without a connection or a driver: the one
check the desktop's Settings dialog (before anything is saved), its main process and every
``maka`` command (``storage/ledger/database_choice.py``) apply, and the password mask they show.
Standard library only: the window imports it.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit, urlunsplit

from runtime.ledger.codes import StoreCode

DATABASE_URL_INVALID = StoreCode.DATABASE_URL_INVALID.value
POSTGRES_SCHEMES = ("postgresql", "postgres")
MASK = "****"
MAX_URL_LENGTH = 2048
EXPECTED = "postgresql://user@host:5432/database"
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


def database_url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as a PostgreSQL URL (a phrase to follow "the URL"), or None
    when its shape is right. Only the shape: the server is not asked."""
    text = url.strip()
    if not text:
        return "is empty"
    if len(text) > MAX_URL_LENGTH:
        return f"is longer than {MAX_URL_LENGTH} characters"
    if any(char.isspace() or ord(char) < 32 for char in text):
        return "contains spaces or control characters"
    scheme, sep, _rest = text.partition("://")
    if not sep or scheme.lower() not in POSTGRES_SCHEMES:
        return "must start with postgresql:// or postgres://"
    if _BAD_PERCENT.search(text):
        # libpq refuses it quoting the token, the password perhaps: never sent to it.
        return "has a % not followed by two hexadecimal digits (write a % in it as %25)"
    try:
        parts = urlsplit(text)
        port = parts.port
        hostname = parts.hostname
    except ValueError as error:
        if "IPv6" in str(error):
            return "has a [ of an IPv6 address without its ]"
        return "has a port that is not a number from 1 to 65535"
    if port == 0:
        return "has a port that is not a number from 1 to 65535"
    if not hostname and not parse_qs(parts.query).get("host"):
        return "names no server (host)"
    return None


def masked_database_url(url: str) -> str:
    """``url`` with its password replaced by ``****`` (what the window, logs and reports show);
    a URL that does not parse keeps only its scheme."""
    try:
        parts = urlsplit(url)
        password = parts.password
        port = parts.port
    except ValueError:
        return url.partition("://")[0] + "://" + MASK
    if password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    if port is not None:
        host = f"{host}:{port}"
    user = f"{parts.username or ''}:{MASK}@"
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


def has_password(url: str) -> bool:
    try:
        return urlsplit(url).password is not None
    except ValueError:
        return False
