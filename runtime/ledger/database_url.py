"""The shape of a PostgreSQL database URL, checked without a connection or a driver: the one
check the desktop's Settings dialog (before anything is saved), its main process and every
``maka`` command (``storage/ledger/database_choice.py``) apply, and the password mask they show.
Standard library only: the window imports it.

The URL is read as libpq reads it (``conninfo_uri_parse`` in ``fe-connect.c``), not as
``urllib`` does: the user part ends at the first ``@`` before any ``/`` (so a password may hold a
raw ``?`` or ``#``), a ``#`` is not a fragment, and the query is libpq's ``name=value`` list,
which may carry the password too (``?password=``, ``sslpassword``, ...). What libpq would refuse
there only when connecting (a port out of range, an unknown parameter, a bad ``sslmode``) is
refused here with ``database_url_invalid`` instead; a refusal never quotes a value.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from runtime.ledger.codes import StoreCode

DATABASE_URL_INVALID = StoreCode.DATABASE_URL_INVALID.value
POSTGRES_SCHEMES = ("postgresql", "postgres")
MASK = "****"
MAX_URL_LENGTH = 2048
EXPECTED = "postgresql://user@host:5432/database"
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_PERCENT_NUL = re.compile(r"%00")
_ANY_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_PORT = re.compile(r"[0-9]+")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_SHOWN_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")
PORT_PROBLEM = "has a port that is not a number from 1 to 65535"

SECRET_PARAMETERS = frozenset(
    {"password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key"}
)
"""The connection parameters whose value is a secret: masked wherever the URL is shown."""
PARAMETERS = SECRET_PARAMETERS | frozenset(
    {
        "application_name",
        "channel_binding",
        "client_encoding",
        "connect_timeout",
        "dbname",
        "fallback_application_name",
        "gssdelegation",
        "gssencmode",
        "gsslib",
        "host",
        "hostaddr",
        "keepalives",
        "keepalives_count",
        "keepalives_idle",
        "keepalives_interval",
        "krbsrvname",
        "load_balance_hosts",
        "max_protocol_version",
        "min_protocol_version",
        "oauth_client_id",
        "oauth_issuer",
        "oauth_scope",
        "options",
        "passfile",
        "port",
        "replication",
        "require_auth",
        "requirepeer",
        "requiressl",  # still taken: sslmode=require (1) or prefer
        "service",
        "ssl_max_protocol_version",
        "ssl_min_protocol_version",
        "sslcert",
        "sslcertmode",
        "sslcompression",
        "sslcrl",
        "sslcrldir",
        "sslkey",
        "sslkeylogfile",
        "sslmode",
        "sslnegotiation",
        "sslrootcert",
        "sslsni",
        "target_session_attrs",
        "tcp_user_timeout",
        "user",
    }
)
"""The connection parameters libpq takes in a URL's query (libpq 18's ``PQconndefaults``, and
``requiressl``); besides these only ``ssl=true`` (JDBC's spelling of ``sslmode=require``)."""
SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")


class _Url:
    """A URL cut where libpq cuts it, each part as written (percent-encoded). A plain class,
    not a ``NamedTuple``: this module is on ``maka sessions``' path, where a named tuple's
    annotations, strings here, would be compiled by ``typing`` (the first ``compile`` of a
    process costs ~2.5 ms; tests/e2e/test_small_command_imports.py)."""

    __slots__ = ("hosts", "middle", "prefix", "query", "userinfo")

    def __init__(
        self,
        prefix: str,  # the scheme and ://
        userinfo: str | None,  # before the @ (None: no @)
        hosts: list[tuple[str, str | None]],  # each host (an IPv6 one without []) and its port
        middle: str,  # the hosts and the /database, as written
        query: str | None,  # after the ? (None: no ?)
    ) -> None:
        self.prefix = prefix
        self.userinfo = userinfo
        self.hosts = hosts
        self.middle = middle
        self.query = query


class _Refused(ValueError):
    pass


def _split(text: str) -> _Url | None:
    """``text`` cut as libpq cuts a URL, or None when it does not start with a scheme and ://.
    Raises ``_Refused`` (its phrase) where libpq refuses the URL's shape."""
    match = _ANY_PREFIX.match(text)
    if match is None:
        return None
    prefix, rest = match.group(), text[match.end() :]
    slash = rest.find("/")
    at = rest.find("@", 0, len(rest) if slash < 0 else slash)
    userinfo = None
    if at >= 0:
        userinfo, rest = rest[:at], rest[at + 1 :]
    hosts: list[tuple[str, str | None]] = []
    i = 0
    while True:
        if rest.startswith("[", i):
            close = rest.find("]", i)
            if close < 0:
                raise _Refused("has a [ of an IPv6 address without its ]")
            if close == i + 1:
                raise _Refused("has an empty IPv6 address ([])")
            host, end = rest[i + 1 : close], close + 1
            if end < len(rest) and rest[end] not in ":/?,":
                raise _Refused("has something other than :port after the ] of an IPv6 address")
        else:
            end = _end(rest, i, ":/?,")
            host = rest[i:end]
        port = None
        if rest.startswith(":", end):
            port_end = _end(rest, end + 1, "/?,")
            port, end = rest[end + 1 : port_end], port_end
        hosts.append((host, port))
        if not rest.startswith(",", end):
            break
        i = end + 1
    query = None
    if rest.startswith("/", end):
        mark = rest.find("?", end)
        if mark >= 0:
            query, rest = rest[mark + 1 :], rest[:mark]
    elif rest.startswith("?", end):
        query, rest = rest[end + 1 :], rest[:end]
    return _Url(prefix, userinfo, hosts, rest, query)


def _end(text: str, start: int, stops: str) -> int:
    end = start
    while end < len(text) and text[end] not in stops:
        end += 1
    return end


def _parameters(query: str) -> list[tuple[str, str]]:
    """The query's ``name=value`` pairs as written, in order (libpq lets one trailing ``&``
    be); ``_Refused`` for a pair libpq cannot cut."""
    pairs = query.split("&")
    if pairs[-1] == "":
        pairs.pop()
    cut: list[tuple[str, str]] = []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise _Refused("has a query parameter without =value")
        if "=" in value:
            raise _Refused("has a second = in a query parameter (write an = in a value as %3D)")
        cut.append((name, value))
    return cut


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
    if not sep or scheme not in POSTGRES_SCHEMES:
        # (libpq takes the scheme in lower case only: POSTGRESQL:// is not a URL to it)
        return "must start with postgresql:// or postgres://"
    if _BAD_PERCENT.search(text):
        # libpq refuses it quoting the token, the password perhaps: never sent to it.
        return "has a % not followed by two hexadecimal digits (write a % in it as %25)"
    if _PERCENT_NUL.search(text):
        return "has %00 (libpq takes no zero byte in a URL)"
    try:
        parts = _split(text)
        parameters = _parameters("" if parts is None else parts.query or "")
    except _Refused as refused:
        return str(refused)
    if parts is None:  # (not reached: the scheme was checked)
        return "must start with postgresql:// or postgres://"
    if any(port is not None and not _is_port(port) for _host, port in parts.hosts):
        return PORT_PROBLEM
    given: dict[str, str] = {}
    for written, raw in parameters:
        name, value = unquote(written), unquote(raw)
        problem = _parameter_problem(name, value)
        if problem is not None:
            return problem
        given[name] = value  # the last one counts, as in libpq
    if not any(host for host, _port in parts.hosts) and not (
        given.get("host") or given.get("hostaddr")
    ):
        return "names no server (host)"
    return _count_problem(parts, given)


def _is_port(text: str) -> bool:
    return not text or (_PORT.fullmatch(text) is not None and 1 <= int(text) <= 65535)


def _parameter_problem(name: str, value: str) -> str | None:
    if name == "ssl":
        return None if value == "true" else "has ssl= other than ssl=true (or use sslmode=)"
    if name not in PARAMETERS:
        if _SHOWN_NAME.fullmatch(name):
            return f'has a query parameter "{name}" that PostgreSQL does not know'
        return "has a query parameter name that PostgreSQL does not know"
    if name == "port" and not all(_is_port(port) for port in value.split(",")):
        return PORT_PROBLEM
    if name == "connect_timeout" and _INTEGER.fullmatch(value) is None:
        return "has a connect_timeout that is not a whole number of seconds"
    if name == "sslmode" and value not in SSL_MODES:
        return "has an sslmode that is not one of " + ", ".join(SSL_MODES)
    return None


def _count_problem(parts: _Url, given: dict[str, str]) -> str | None:
    """libpq's pairing of hosts and ports (``connectOptions2``): one port for all the hosts, or
    one per host (the hosts counted in ``hostaddr`` when it is given)."""
    hosts = given.get("host", ",".join(host for host, _port in parts.hosts))
    ports = given.get("port", ",".join(port or "" for _host, port in parts.hosts))
    addresses = given.get("hostaddr", "")
    count = len((addresses or hosts or "x").split(","))
    if addresses and hosts and len(hosts.split(",")) != count:
        return "names a different number of hosts and hostaddr addresses"
    if ports and len(ports.split(",")) not in (1, count):
        return "has neither one port for all its hosts nor one port per host"
    return None


def masked_database_url(url: str) -> str:
    """``url`` with every password in it replaced by ``****`` (the one after ``user:``, and
    the values of ``password``, ``sslpassword`` and the other secret query parameters): what
    the window, logs and reports show. A URL libpq cannot cut keeps only its scheme."""
    try:
        parts = _split(url)
    except _Refused:
        return url.partition("://")[0] + "://" + MASK
    if parts is None:  # not a URL: a "key=value" connection string, perhaps
        return _KEY_VALUE_SECRET.sub(lambda match: match.group(1) + MASK, url)
    userinfo = parts.userinfo
    if userinfo is not None and ":" in userinfo:
        userinfo = userinfo.partition(":")[0] + ":" + MASK
    query = parts.query
    if query is not None:
        query = "&".join(
            _masked_pair(pair) if pair.partition("=")[1] else pair for pair in query.split("&")
        )
    return _joined(parts, userinfo, query)


_KEY_VALUE_SECRET = re.compile(
    r"((?:^|\s)(?:" + "|".join(sorted(SECRET_PARAMETERS)) + r")\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)"
)


def _masked_pair(pair: str) -> str:
    name, _sep, _value = pair.partition("=")
    return f"{name}={MASK}" if unquote(name) in SECRET_PARAMETERS else pair


def _joined(parts: _Url, userinfo: str | None, query: str | None) -> str:
    text = parts.prefix + ("" if userinfo is None else userinfo + "@") + parts.middle
    return text if query is None else f"{text}?{query}"


def with_stored_passwords(typed: str, stored: str) -> str:
    """``typed`` with each ``****`` password (the masked URL shown, perhaps edited) given back
    the one at the same place in ``stored``, as written there: after ``user:``, or the last
    value of the same secret query parameter (its first for the first, and so on). A ``****``
    with none stored stays as typed."""
    try:
        parts = _split(typed)
        old = _split(stored)
    except _Refused:
        return typed
    if parts is None or old is None:
        return typed
    userinfo = parts.userinfo
    masked = userinfo is not None and userinfo.partition(":")[1:] == (":", MASK)
    if userinfo is not None and masked and old.userinfo is not None and ":" in old.userinfo:
        userinfo = userinfo.partition(":")[0] + ":" + old.userinfo.partition(":")[2]
    query = parts.query
    if query is not None:
        kept: dict[str, list[str]] = {}
        for name, _sep, value in (pair.partition("=") for pair in (old.query or "").split("&")):
            if unquote(name) in SECRET_PARAMETERS:
                kept.setdefault(unquote(name), []).append(value)
        seen: dict[str, int] = {}
        restored = []
        for written in query.split("&"):
            name, sep, value = written.partition("=")
            values = kept.get(unquote(name), [])
            nth = seen[unquote(name)] = seen.get(unquote(name), -1) + 1
            if sep and value == MASK and values:
                # the same parameter the same number of times before: its password there
                value = values[min(nth, len(values) - 1)]
            restored.append(name + sep + value)
        query = "&".join(restored)
    return _joined(parts, userinfo, query)


def url_secrets(url: str) -> list[str]:
    """Every password ``url`` holds (after ``user:`` and in the secret query parameters), as
    written and percent-decoded, longest first: what a refusal quoting the URL must not show.
    A URL libpq cannot cut gives what a plain split finds after ``user:``."""
    found: list[str] = []
    try:
        parts = _split(url)
    except _Refused:
        parts = None
    if parts is None:
        userinfo = url.partition("://")[2].rpartition("@")[0]
        found.append(userinfo.partition(":")[2])
    else:
        if parts.userinfo is not None:
            found.append(parts.userinfo.partition(":")[2])
        for pair in (parts.query or "").split("&"):
            name, _sep, value = pair.partition("=")
            if unquote(name) in SECRET_PARAMETERS:
                found.append(value)
    secrets = {text for written in found if written for text in (written, unquote(written))}
    return sorted(secrets, key=len, reverse=True)
