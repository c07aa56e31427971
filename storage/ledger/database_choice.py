"""Which database holds the ledger: ``runtime.sqlite`` in the data folder (the default) or a
PostgreSQL server, and the checks of a database URL. Never imports psycopg.

Precedence: ``MAKA_DATABASE_URL``, when set and not empty, wins; else the data folder's
``settings.json`` (the desktop's Settings › Database: ``"database": "postgresql"`` with
``"database_url"``); else SQLite. The setting lives in the data folder, so the desktop and every
``maka`` command run with the same data folder open the same ledger.

Why the URL (password included, when the user typed one) is kept in ``settings.json``: the file
already holds the provider's API key, is written atomically with mode 0600 in a 0700 folder, and
its only writer is the main process. The password is never sent back to the window (it sees
``masked_database_url``), never logged and never printed by ``maka doctor``. A URL without a
password works too: libpq then reads ``PGPASSWORD`` or the passfile (``~/.pgpass``,
``PGPASSFILE``), which is the way to keep the password out of the data folder entirely.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path

from runtime.ledger.codes import StoreCode
from runtime.ledger.database_url import EXPECTED, database_url_problem, with_stored_passwords
from runtime.ledger.store_ports import StoreRefusal

DATABASE_URL_VARIABLE = "MAKA_DATABASE_URL"
SETTINGS_FILE = "settings.json"
DATABASE_KEY = "database"
"""``settings.json``: ``"sqlite"`` (or missing) or ``"postgresql"``."""
DATABASE_URL_KEY = "database_url"
"""``settings.json``: the PostgreSQL URL, kept while SQLite is chosen so it can be chosen again."""
POSTGRESQL = "postgresql"
SQLITE = "sqlite"
INSTALL_HINT = "pip install 'maka[postgres]'"


class DatabaseSource(StrEnum):
    DEFAULT = "default"
    SETTING = "setting"
    ENVIRONMENT = "environment"


class DatabaseSelection:
    """The URL of the PostgreSQL ledger (None: SQLite in the data folder) and what chose it.
    (A plain class: ``maka sessions`` starts without ``dataclasses`` and compiles no
    annotation, as a named tuple's fields would be.)"""

    __slots__ = ("source", "url")

    def __init__(self, url: str | None, source: DatabaseSource) -> None:
        self.url = url
        self.source = source

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DatabaseSelection):
            return NotImplemented
        return (self.url, self.source) == (other.url, other.source)

    def __hash__(self) -> int:
        return hash((self.url, self.source))

    def __repr__(self) -> str:
        return f"DatabaseSelection(url={self.url!r}, source={self.source!r})"


def check_database_url(url: str, *, origin: str = "the database URL") -> str:
    """``url`` stripped, or ``database_url_invalid`` saying what is wrong with it (``origin``
    names where it came from). Checks the shape only; no connection is made."""
    problem = database_url_problem(url)
    if problem is not None:
        raise StoreRefusal(
            StoreCode.DATABASE_URL_INVALID, f"{origin} {problem}; expected {EXPECTED}"
        )
    return url.strip()


def unmasked_database_url(url: str, stored: str) -> str:
    """``url`` as typed, with a ``****`` password (the masked URL shown, perhaps edited) given
    back the stored URL's password, after ``user:`` or in the query (``?password=****``): the
    window never holds the password, yet saving what it shows keeps it."""
    return with_stored_passwords(url.strip(), stored)


def postgres_driver_installed() -> bool:
    """Whether psycopg can be imported (asked without importing it)."""
    return importlib.util.find_spec("psycopg") is not None


def stored_database(data_dir: Path) -> tuple[str, str]:
    """The data folder's Database setting: (``"sqlite"`` or ``"postgresql"``, the stored URL).
    A missing file reads as the default; one that is there but cannot be read (its mode, a
    folder) or is not a JSON object is refused (``settings_damaged``): a PostgreSQL choice read
    as the default would open (and start) a second ledger in the data folder, where the user's
    sessions are not."""
    path = Path(data_dir) / SETTINGS_FILE
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return SQLITE, ""
    except IsADirectoryError:
        raise _damaged(path, "it is a folder, not a file") from None
    except OSError as error:  # there, but not readable (its mode, its owner): no guessing
        if not os.access(data_dir, os.R_OK | os.X_OK):
            return SQLITE, ""  # the data folder itself: opening the store says so, coded
        raise _damaged(path, f"it cannot be read ({error.strerror or error})") from None
    import json  # only when there is a file to read (``maka sessions`` start-up)

    try:
        raw = json.loads(data.decode("utf-8-sig"))  # (a byte-order mark from an editor)
    except ValueError as error:  # (UnicodeDecodeError is a ValueError)
        raise _damaged(path, f"it is not JSON text ({error})") from None
    if not isinstance(raw, dict):
        raise _damaged(path, f"it holds a JSON {type(raw).__name__}, not an object")
    choice = raw.get(DATABASE_KEY, SQLITE)
    if choice not in (SQLITE, POSTGRESQL):
        raise _damaged(path, _choice_problem(choice))
    url = raw.get(DATABASE_URL_KEY, "")
    if not isinstance(url, str):
        raise _damaged(path, f'its "{DATABASE_URL_KEY}" is not text')
    return choice, url


def _choice_problem(choice: object) -> str:
    """What is wrong with a ``"database"`` value, never showing a URL (it may hold a password:
    a URL put under ``"database"`` instead of ``"database_url"`` is an easy mistake)."""
    expected = f'not "{SQLITE}" or "{POSTGRESQL}"'
    if isinstance(choice, str) and ("://" in choice or "@" in choice):
        return (
            f'its "{DATABASE_KEY}" holds a URL, {expected}: a server\'s URL goes in '
            f'"{DATABASE_URL_KEY}", with "{DATABASE_KEY}": "{POSTGRESQL}"'
        )
    if isinstance(choice, str) and len(choice) <= 40 and choice.isprintable():
        return f'its "{DATABASE_KEY}" is "{choice}", {expected}'
    import json

    kind = "text" if isinstance(choice, str) else json.dumps(choice)[:20]
    return f'its "{DATABASE_KEY}" is {kind}, {expected}'


def _damaged(path: Path, why: str) -> StoreRefusal:
    return StoreRefusal(
        StoreCode.SETTINGS_DAMAGED,
        f"{path} cannot be read as settings: {why}. Its Database choice is unknown, so no "
        f'ledger was opened; fix the file (it is a JSON object such as {{"{DATABASE_KEY}": '
        f'"{SQLITE}"}}), or remove it to use this computer\'s database',
    )


def select_database(
    data_dir: Path | None, environ: Mapping[str, str] | None = None
) -> DatabaseSelection:
    """Which database the ledger is in, unchecked (see the module for the precedence)."""
    env = os.environ if environ is None else environ
    from_env = env.get(DATABASE_URL_VARIABLE, "").strip()
    if from_env:
        return DatabaseSelection(from_env, DatabaseSource.ENVIRONMENT)
    if data_dir is not None:
        choice, url = stored_database(data_dir)
        if choice == POSTGRESQL:
            return DatabaseSelection(url.strip(), DatabaseSource.SETTING)
    return DatabaseSelection(None, DatabaseSource.DEFAULT)


def database_url(data_dir: Path | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The PostgreSQL server the ledger is on, or None (the default: ``runtime.sqlite`` in the
    data folder). Refused: a URL that is not PostgreSQL's (``database_url_invalid``), or one
    without the driver installed (``postgres_driver_missing``)."""
    selection = select_database(data_dir, environ)
    if selection.url is None:
        return None
    origin = (
        DATABASE_URL_VARIABLE
        if selection.source is DatabaseSource.ENVIRONMENT
        else f"the Database setting in {Path(str(data_dir)) / SETTINGS_FILE}"
    )
    url = check_database_url(selection.url, origin=origin)
    if not postgres_driver_installed():
        raise StoreRefusal(
            StoreCode.POSTGRES_DRIVER_MISSING,
            f"{origin} selects a PostgreSQL server, but its driver is not installed: run "
            f"{INSTALL_HINT} (or choose this computer's database)",
        )
    return url


def uses_postgres(data_dir: Path | None, environ: Mapping[str, str] | None = None) -> bool:
    """Whether a PostgreSQL server is selected (valid or not); never raises. A damaged settings
    file may select one: True, so that opening the store (which refuses it) is not skipped."""
    try:
        return select_database(data_dir, environ).url is not None
    except StoreRefusal:
        return True


def no_ledger_yet(data_dir: Path) -> bool:
    """Nothing to read: this computer's database chosen and no database file in the data folder
    yet. A server ledger is never "not yet" here: only the server knows its sessions."""
    from storage.ledger.sqlite_connection import DATABASE_NAME

    if uses_postgres(data_dir):
        return False
    try:
        os.stat(Path(data_dir) / DATABASE_NAME)
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:  # a data folder Maka may not read: opening the store says so, with a code
        return False
    return False


def with_way_back(refusal: StoreRefusal, data_dir: Path) -> StoreRefusal:
    """``refusal`` of a server the Database setting chose (not the variable), saying how to start
    with this computer's database again: the window's Settings cannot be opened while the store
    is refused."""
    try:
        if select_database(data_dir).source is not DatabaseSource.SETTING:
            return refusal
    except StoreRefusal:
        return refusal
    path = Path(data_dir) / SETTINGS_FILE
    return StoreRefusal(
        refusal.code,
        f"{refusal.message} (this PostgreSQL server was chosen in Settings › Database; to start "
        f'with this computer\'s database instead, set "{DATABASE_KEY}" to "{SQLITE}" in {path})',
        refusal.event_id,
    )
