"""A PostgreSQL URL read as libpq reads it (``runtime/ledger/database_url.py``): every password in
it masked wherever it is shown (after ``user:``, and ``?password=``, ``sslpassword`` and the
other secret parameters), the masked URL saved again keeping the stored passwords, and what libpq
would refuse only when connecting (a port out of range, an unknown parameter, a bad ``sslmode`` or
``connect_timeout``) refused as ``database_url_invalid`` (docs/postgres.md). libpq itself (through
psycopg) is the judge of what a URL means."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from app import bridge_contract as bc
from app.host.desktop_settings import DesktopSettings
from app.host.host_services import SettingsChange
from runtime.ledger.codes import StoreCode
from runtime.ledger.database_url import (
    MASK,
    PARAMETERS,
    SECRET_PARAMETERS,
    database_url_problem,
    masked_database_url,
    url_secrets,
)
from runtime.ledger.store_ports import StoreRefusal
from storage.ledger.database_choice import check_database_url, database_url, unmasked_database_url
from storage.ledger.postgres_doctor import redacted

pytestmark = pytest.mark.unit

psycopg = pytest.importorskip("psycopg")
from psycopg import pq  # noqa: E402
from psycopg.conninfo import conninfo_to_dict, timeout_from_conninfo  # noqa: E402

SOCKET = "postgresql://pwuser@/pwdb?host=/sock&port=5547"


def _libpq(url: str) -> dict[str, str]:
    return {key: str(value) for key, value in conninfo_to_dict(url).items()}


# -- the passwords, masked ----------------------------------------------------------------------

# Passwords start with PW and nothing else in the generated URLs has a capital letter, so the
# password (as typed or as written) is found in the masked text only if it was left there.
_password = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12
).map(lambda text: "PW" + text)
_lower = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=8)
# libpq ends the user at the first ":", the password at the first "@" before any "/": "?", "#",
# ":" and "," may stay raw in it (urllib reads them otherwise).
_USERINFO_RAW = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$'()*+,;?#:"
_QUERY_RAW = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$'()*+,;?#:/@"


def _written(text: str, raw: str) -> str:
    return "".join(char if char in raw else quote(char, safe="") for char in text)


@st.composite
def _urls_with_passwords(draw: st.DrawFn) -> tuple[str, dict[str, str], str]:
    """A URL, the passwords in it by libpq's name (the one after ``user:`` is ``password``,
    unless a ``?password=`` later in the URL wins), and the URL with another database."""
    user, db = draw(_lower), draw(_lower)
    secrets: dict[str, str] = {}
    userinfo = user
    if draw(st.booleans()):
        secrets["password"] = draw(_password)
        userinfo = f"{user}:{_written(secrets['password'], _USERINFO_RAW)}"
    host = draw(st.sampled_from(["db", "127.0.0.1", "[::1]:5433", "db:5432,db2:5433", ""]))
    query = [f"application_name={draw(_lower)}"] if draw(st.booleans()) else []
    if not host:
        query.append("host=/run/postgresql")
    for name in draw(st.lists(st.sampled_from(sorted(SECRET_PARAMETERS)), max_size=3, unique=True)):
        secrets[name] = draw(_password)
        written_name = name if draw(st.booleans()) else name.replace("s", "%73")
        query.append(f"{written_name}={_written(secrets[name], _QUERY_RAW)}")
    if not secrets:
        secrets["password"] = draw(_password)
        userinfo = f"{user}:{_written(secrets['password'], _USERINFO_RAW)}"
    tail = ""
    if draw(st.booleans()) or query:
        tail = "?" + "&".join(draw(st.permutations(query)))
    url = f"postgresql://{userinfo}@{host}/{{}}{tail}"
    return url.format(db), secrets, url.format(db + "_other")


@settings(max_examples=300, deadline=None)
@given(_urls_with_passwords())
@example((SOCKET + "&password=S3cretPW_xyz", {"password": "S3cretPW_xyz"}, ""))
@example(("postgresql://maka:PW12?x@db/maka", {"password": "PW12?x"}, ""))
def test_no_password_is_left_in_the_masked_url(case: tuple[str, dict[str, str], str]) -> None:
    url, secrets, _other = case
    assert {k: v for k, v in _libpq(url).items() if k in SECRET_PARAMETERS} == secrets
    for shown in (masked_database_url(url), redacted(url)):
        for secret in secrets.values():
            assert secret not in shown
            assert _written(secret, _USERINFO_RAW) not in shown
            assert _written(secret, _QUERY_RAW) not in shown
        parsed = _libpq(shown)
        assert {k: v for k, v in parsed.items() if k in SECRET_PARAMETERS} == dict.fromkeys(
            secrets, MASK
        )
        # all but the passwords is shown as written
        assert {k: v for k, v in parsed.items() if k not in SECRET_PARAMETERS} == {
            k: v for k, v in _libpq(url).items() if k not in SECRET_PARAMETERS
        }


@settings(max_examples=300, deadline=None)
@given(_urls_with_passwords())
def test_a_refusal_quoting_the_url_keeps_no_password(case: tuple[str, dict[str, str], str]) -> None:
    """What libpq says of a URL may quote it, decoded or as written: every password is taken
    out of a refusal (``url_secrets``: the one after ``user:`` and the query's)."""
    url, secrets, _other = case
    assume(all(secret not in MASK for secret in secrets.values()))
    said = f'invalid connection option in "{url}"; ' + "; ".join(secrets.values())
    for secret in url_secrets(url):
        said = said.replace(secret, MASK)
    for secret in filter(None, secrets.values()):
        assert secret not in said
        assert _written(secret, _QUERY_RAW) not in said


@settings(max_examples=200, deadline=None)
@given(_urls_with_passwords())
def test_the_masked_url_saved_again_keeps_the_passwords(
    case: tuple[str, dict[str, str], str],
) -> None:
    url, _secrets, other = case
    assert unmasked_database_url(masked_database_url(url), url) == url
    # the database edited in the masked URL: the passwords kept, the new database taken
    assert unmasked_database_url(masked_database_url(other), url) == other


def test_a_query_password_is_masked_in_the_settings_and_kept_on_saving(tmp_path: Path) -> None:
    stored = SOCKET + "&password=S3cretPW_xyz&sslpassword=k3y%26"
    masked = SOCKET + "&password=****&sslpassword=****"
    settings = DesktopSettings(tmp_path)
    change = SettingsChange(
        provider=bc.ProviderChoice.OFFLINE_DEMO, database="postgresql", database_url=stored
    )
    assert settings.update(change).database_url == masked
    again = SettingsChange(provider=bc.ProviderChoice.OFFLINE_DEMO, database_url=masked)
    assert settings.update(again).database_url == masked
    assert database_url(tmp_path, {}) == stored
    assert settings.database_url_to_try(masked.replace("pwdb", "other")) == stored.replace(
        "pwdb", "other"
    )
    # a new password typed replaces the stored one; a **** with none stored stays as typed
    assert unmasked_database_url(SOCKET + "&password=new", stored) == SOCKET + "&password=new"
    assert unmasked_database_url(SOCKET + "&oauth_client_secret=****", stored).endswith("=****")
    # a parameter given twice: each **** gets the stored one at the same place
    twice = SOCKET + "&password=first&password=second"
    assert unmasked_database_url(masked_database_url(twice), twice) == twice


def test_a_password_that_is_not_in_a_url_is_masked_too() -> None:
    assert masked_database_url("host=db password=s3cret user=maka") == (
        "host=db password=**** user=maka"
    )
    assert masked_database_url("postgresql://u:s3cret@[::1/db") == "postgresql://****"


# -- the URL's shape, checked -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("port=70000", "has a port that is not a number from 1 to 65535"),
        ("port=5432,0", "has a port that is not a number from 1 to 65535"),
        ("port=x", "has a port that is not a number from 1 to 65535"),
        ("sslmode=zz", "has an sslmode that is not one of"),
        ("sslmode=REQUIRE", "has an sslmode that is not one of"),
        ("connect_timeout=abc", "has a connect_timeout that is not a whole number"),
        ("connect_timeout=1.5", "has a connect_timeout that is not a whole number"),
        ("bogusopt=1", 'has a query parameter "bogusopt" that PostgreSQL does not know'),
        ("Password=S3cretPW_xyz", 'has a query parameter "Password" that PostgreSQL does not'),
        ("pass%20word=S3cretPW_xyz", "has a query parameter name that PostgreSQL does not know"),
        ("ssl=false", "has ssl= other than ssl=true"),
        ("S3cretPW_xyz", "has a query parameter without =value"),
        ("password=S3cret=PW_xyz", "has a second = in a query parameter"),
        ("password=S3cretPW%00_xyz", "has %00"),
        ("host=/a,/b&port=1,2,3", "has neither one port for all its hosts nor one port per"),
        ("host=/a,/b&hostaddr=127.0.0.1", "names a different number of hosts and hostaddr"),
    ],
)
def test_a_bad_query_is_refused_before_it_is_used(query: str, problem: str) -> None:
    url = f"{SOCKET}&{query}"
    found = database_url_problem(url)
    assert found is not None and found.startswith(problem), found
    assert "S3cret" not in found and "PW_xyz" not in found
    with pytest.raises(StoreRefusal) as refused:
        check_database_url(url)
    assert refused.value.code is StoreCode.DATABASE_URL_INVALID
    with pytest.raises(StoreRefusal) as at_open:  # MAKA_DATABASE_URL, at open
        database_url(None, {"MAKA_DATABASE_URL": url})
    assert at_open.value.code is StoreCode.DATABASE_URL_INVALID


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://h1:5432,h2:70000/db",
        "postgresql://h1:70000,h2:5432/db",
        "POSTGRESQL://maka@db/maka",
        "postgresql://[]/db",
        "postgresql://[::1]x/db",
        "postgresql://maka@db/maka?&",
    ],
)
def test_what_libpq_cannot_read_is_refused(url: str) -> None:
    assert database_url_problem(url) is not None


@pytest.mark.parametrize(
    "query",
    [
        "application_name=maka%20desktop",
        "options=-c%20search_path%3Dledger",
        "target_session_attrs=read-write",
        "sslrootcert=/etc/ssl/root.crt&sslcert=/c.crt&sslkey=/c.key&sslmode=verify-full",
        "host=/a,/b&port=5432,5433",
        "host=/a,/b&port=5432",
        "host=/a,/b&port=,5433",
        "hostaddr=127.0.0.1",
        "dbname=other&user=other&service=ledger",
        "keepalives=1&keepalives_idle=5&keepalives_interval=1&keepalives_count=3",
        "gssencmode=disable&channel_binding=prefer",
        "connect_timeout=10",
        "connect_timeout=-1",
        "ssl=true",
        "requiressl=1",
        "pass%77ord=x",
        "sslmode=require&",
    ],
)
def test_what_libpq_takes_passes(query: str) -> None:
    assert database_url_problem(f"{SOCKET}&{query}") is None


def test_every_parameter_libpq_knows_passes() -> None:
    known = pq.Conninfo.get_defaults()
    names = {option.keyword.decode() for option in known}
    assert names <= PARAMETERS
    assert {o.keyword.decode() for o in known if o.dispchar == b"*"} <= SECRET_PARAMETERS
    for name in sorted(names):
        value = {"port": "5432", "connect_timeout": "5", "sslmode": "prefer"}.get(name, "x")
        assert database_url_problem(f"{SOCKET}&{name}={value}") is None, name


_VALUES = {
    "port": ["5432", "1", "65535", "0", "65536", "70000", "x", "", "5432,5433", "+1", "5432,"],
    "connect_timeout": ["10", "0", "-1", "abc", "1.5", ""],
    "sslmode": ["disable", "prefer", "require", "verify-full", "zz", "", "Require"],
    "host": ["/nonexistent/a", "/nonexistent/a", "/nonexistent/a,/nonexistent/b", ""],
    "hostaddr": ["127.0.0.1", "127.0.0.1,127.0.0.1"],
    "application_name": ["maka", "a%26b"],
    "password": ["pw", "p%3Dw"],
    "ssl": ["true", "false"],
    "bogusopt": ["1"],
    "target_session_attrs": ["any"],
    "keepalives_idle": ["5"],
}


@st.composite
def _candidate_urls(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["postgresql"] * 6 + ["postgres", "POSTGRESQL", "Postgres"]))
    hosts = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["127.0.0.1", "[::1]", ""]),
                st.sampled_from(["", "", ":1", ":5432", ":0", ":70000", ":x", ":"]),
            ),
            max_size=3,
        )
    )
    netloc = ",".join(host + port for host, port in hosts)
    user = draw(st.sampled_from(["", "maka@", "maka:pw@", "maka:p?w@"]))
    params = draw(
        st.lists(
            st.sampled_from(sorted(_VALUES)).flatmap(
                lambda name: st.sampled_from(_VALUES[name]).map(lambda v: f"{name}={v}")
            ),
            max_size=4,
        )
    )
    url = f"{scheme}://{user}{netloc}/db"
    if draw(st.booleans()) or params:
        url += "?" + "&".join(params) + draw(st.sampled_from(["", "&"]))
    return url


@settings(max_examples=800, deadline=None)
@given(_candidate_urls())
@example("postgresql://pwuser@/pwdb?host=/nonexistent/a&port=70000")
@example("postgresql://pwuser@/pwdb?host=/nonexistent/a&sslmode=zz")
@example("postgresql://pwuser@/pwdb?host=/nonexistent/a&connect_timeout=abc")
@example("postgresql://pwuser@/pwdb?host=/nonexistent/a&bogusopt=1")
def test_every_accepted_url_is_one_libpq_takes(url: str) -> None:
    """libpq parses it, and starting a connection with it fails (if it fails) only for want of
    the server: never for the URL itself."""
    if database_url_problem(url) is not None:
        return
    params = conninfo_to_dict(url)
    timeout_from_conninfo(params)  # (psycopg reads connect_timeout itself)
    conn = pq.PGconn.connect_start(url.encode())
    try:
        error = conn.error_message.decode()
        if conn.status == pq.ConnStatus.BAD:
            assert error.startswith("connection to server"), error
    finally:
        conn.finish()
