"""The desktop's settings: ``<data_dir>/settings.json``, user-only, written atomically: the
provider (with the OpenAI-compatible provider's waits, context size and tool choice), the step
limit of a turn (``max_steps``), and Safe resume and automatic resume (``safe_resume``,
``auto_resume``; ``MAKA_RUNTIME_SAFE_BOUNDARY_RESUME``, when set, wins). ``maka`` commands read
the same file for the provider (docs/providers.md). The Database setting (``database``,
``database_url``: ``storage/ledger/database_choice.py``) is read when the store is opened, by the
desktop at its start and by every ``maka`` command with this data folder.

Why a file in the data directory: the settings belong with the data they produce (a portable
data directory keeps its provider), and the main process is the only writer. The API key is stored
with mode 0600 and never sent back to the renderer (the contract only says whether one is set).

Precedence: an environment variable (``PROVIDER_ENVIRONMENT``, docs/providers.md) wins over the
file, so a test or a one-off launch can pick a provider without touching the user's settings.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from app.bridge_contract import DEFAULT_MAX_STEPS, MAX_STEPS_LIMIT, ProviderChoice, ProviderTuning
from app.host.host_services import DatabaseTest, SettingsChange, SettingsView
from app.host.resume_switch import SETTINGS_FILE, read_settings
from runtime.ledger.codes import StoreCode
from runtime.ledger.database_url import MASK, masked_database_url, url_secrets
from runtime.ledger.store_ports import StoreRefusal
from storage.ledger.database_choice import (
    DATABASE_KEY,
    DATABASE_URL_KEY,
    INSTALL_HINT,
    POSTGRESQL,
    check_database_url,
    postgres_driver_installed,
    unmasked_database_url,
)
from storage.private_files import ensure_private_dir

__all__ = ["SETTINGS_FILE", "DesktopSettings", "provider_environment"]

_PROVIDER_NAMES = {ProviderChoice.OFFLINE_DEMO: "demo", ProviderChoice.OPENAI_COMPATIBLE: "openai"}

PROVIDER_ENVIRONMENT = (
    "MAKA_PROVIDER",
    "MAKA_OPENAI_BASE_URL",
    "MAKA_MODEL",
    "MAKA_OPENAI_API_KEY",
    "MAKA_OPENAI_TIMEOUT",
    "MAKA_OPENAI_DATA_TIMEOUT",
    "MAKA_OPENAI_CONTEXT_TOKENS",
    "MAKA_OPENAI_TOOL_CHOICE",
)
"""The variables that, when set, win over the provider part of the file (``provider_config``)."""


def provider_environment(environ: Mapping[str, str]) -> tuple[str, ...]:
    """Which of ``PROVIDER_ENVIRONMENT`` are set: the settings dialog names them, because the
    provider they pick is not the one its radio buttons show."""
    return tuple(name for name in PROVIDER_ENVIRONMENT if name in environ)


class DesktopSettings:
    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / SETTINGS_FILE
        self._lock = threading.Lock()
        self._values = self._load()

    def view(self) -> SettingsView:
        with self._lock:
            values = dict(self._values)
        try:
            provider = ProviderChoice(values.get("provider", ProviderChoice.OFFLINE_DEMO.value))
        except ValueError:
            provider = ProviderChoice.OFFLINE_DEMO
        return SettingsView(
            provider=provider,
            openai_base_url=values.get("openai_base_url", ""),
            openai_model=values.get("openai_model", ""),
            api_key_set=bool(values.get("openai_api_key")),
            max_steps=_step_limit(values.get("max_steps")),
            safe_resume=values.get("safe_resume") == "1",
            auto_resume=values.get("auto_resume", "1") == "1",
            provider_tuning=_tuning(values),
            database="postgresql" if values.get(DATABASE_KEY) == POSTGRESQL else "sqlite",
            database_url=masked_database_url(values.get(DATABASE_URL_KEY, "")),
            postgres_driver=postgres_driver_installed(),
        )

    def stored_safe_resume(self) -> bool | None:
        """The Safe resume checkbox, or None when the user never set it."""
        with self._lock:
            value = self._values.get("safe_resume")
        return None if value is None else value == "1"

    def auto_resume(self) -> bool:
        with self._lock:
            return self._values.get("auto_resume", "1") == "1"

    def max_steps(self) -> int:
        """The step limit of the next turn (a missing or damaged value: the default)."""
        with self._lock:
            return _step_limit(self._values.get("max_steps"))

    def update(self, change: SettingsChange) -> SettingsView:
        with self._lock:
            values = dict(self._values)
            values["provider"] = change.provider.value
            values["openai_base_url"] = change.openai_base_url.strip()
            values["openai_model"] = change.openai_model.strip()
            if change.openai_api_key is not None:
                values["openai_api_key"] = change.openai_api_key
            if change.max_steps is not None:
                values["max_steps"] = str(_step_limit(change.max_steps))
            if change.safe_resume is not None:
                values["safe_resume"] = "1" if change.safe_resume else "0"
            if change.auto_resume is not None:
                values["auto_resume"] = "1" if change.auto_resume else "0"
            if change.provider_tuning is not None:
                values.update(_tuning_values(change.provider_tuning))
            _change_database(values, change)
            self._write(values)
            self._values = values
        return self.view()

    def database_url_to_try(self, typed: str | None) -> str:
        """The URL "Test connection" tries: the stored one for ``None``, else ``typed`` with a
        masked password given back the stored one (as saving it would)."""
        with self._lock:
            stored = self._values.get(DATABASE_URL_KEY, "")
        return stored if typed is None else unmasked_database_url(typed, stored)

    def provider_config(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The flat configuration ``build_provider`` reads: the file, then the environment."""
        with self._lock:
            values = dict(self._values)
        config: dict[str, str] = {}
        with contextlib.suppress(KeyError, ValueError):
            config["MAKA_PROVIDER"] = _PROVIDER_NAMES[ProviderChoice(values.get("provider", ""))]
        for key, name in (
            ("openai_base_url", "MAKA_OPENAI_BASE_URL"),
            ("openai_model", "MAKA_MODEL"),
            ("openai_api_key", "MAKA_OPENAI_API_KEY"),
        ):
            if values.get(key):
                config[name] = values[key]
        for key, value in _tuning_values(_tuning(values)).items():
            if value:
                config[_TUNING_ENVIRONMENT[key]] = value
        config.update({k: v for k, v in environ.items() if k.startswith("MAKA_")})
        return config

    def _load(self) -> dict[str, str]:
        return read_settings(self._path)

    def _write(self, values: dict[str, str]) -> None:
        ensure_private_dir(self._path.parent)
        fd, temp = tempfile.mkstemp(prefix=".settings-", dir=self._path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(values, handle, indent=2, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temp, 0o600)
            os.replace(temp, self._path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise


def _change_database(values: dict[str, str], change: SettingsChange) -> None:
    """Apply the Database part of ``change`` to ``values``, or refuse it (nothing is written):
    ``database_url_invalid`` for a PostgreSQL choice whose URL is not one,
    ``postgres_driver_missing`` when the driver is not installed. The masked URL the view
    showed (the password as ``****``) keeps the stored password."""
    if change.database is not None:
        values[DATABASE_KEY] = change.database
    if change.database_url is not None:
        values[DATABASE_URL_KEY] = unmasked_database_url(
            change.database_url, values.get(DATABASE_URL_KEY, "")
        )
    if values.get(DATABASE_KEY) != POSTGRESQL:
        return  # the URL is kept as typed for a later choice of the server; SQLite needs none
    if change.database is None and change.database_url is None:
        return  # the Database part was not changed: a setting saved earlier stays as it is
    check_database_url(values.get(DATABASE_URL_KEY, ""), origin="the database URL")
    if not postgres_driver_installed():
        raise StoreRefusal(
            StoreCode.POSTGRES_DRIVER_MISSING,
            f"the PostgreSQL driver is not installed: run {INSTALL_HINT}, then choose the "
            "server again",
        )


def _step_limit(value: object) -> int:
    """A stored step limit (kept as text, like every value in the file) as a number; anything
    that is not a whole number in range reads as the default."""
    try:
        number = int(str(value))
    except ValueError:
        return DEFAULT_MAX_STEPS
    return number if 1 <= number <= MAX_STEPS_LIMIT else DEFAULT_MAX_STEPS


_TUNING_ENVIRONMENT = {
    "openai_timeout": "MAKA_OPENAI_TIMEOUT",
    "openai_data_timeout": "MAKA_OPENAI_DATA_TIMEOUT",
    "openai_context_tokens": "MAKA_OPENAI_CONTEXT_TOKENS",
    "openai_tool_choice": "MAKA_OPENAI_TOOL_CHOICE",
}
"""The file's keys for ``ProviderTuning`` and the variables they stand for (kept as text, like
every value in the file; an empty value leaves the provider's default)."""


def _tuning_values(tuning: ProviderTuning) -> dict[str, str]:
    def number(value: float | int | None) -> str:
        return "" if value is None else f"{value:g}"

    return {
        "openai_timeout": number(tuning.timeout_s),
        "openai_data_timeout": number(tuning.data_timeout_s),
        "openai_context_tokens": ""
        if tuning.context_tokens is None
        else str(tuning.context_tokens),
        "openai_tool_choice": "auto" if tuning.tool_choice else "off",
    }


def _tuning(values: Mapping[str, str]) -> ProviderTuning:
    """The stored tuning; a damaged value (edited by hand) reads as the provider's default,
    never as an error that would keep the window from opening its settings."""
    fields: dict[str, object] = {"tool_choice": values.get("openai_tool_choice", "auto") != "off"}
    for key, field in (
        ("openai_timeout", "timeout_s"),
        ("openai_data_timeout", "data_timeout_s"),
        ("openai_context_tokens", "context_tokens"),
    ):
        text = values.get(key, "").strip()
        if text:
            fields[field] = text
    try:
        return ProviderTuning.model_validate(fields)
    except ValidationError:
        return ProviderTuning(tool_choice=bool(fields["tool_choice"]))


def try_database(url: str) -> DatabaseTest:
    """Connect to ``url`` read-only and report its version and the ledger's schema there, or the
    coded failure, with the password never in what is returned."""
    masked = masked_database_url(url.strip())

    def failed(code: str, message: str) -> DatabaseTest:
        for secret in url_secrets(url.strip()):  # (after user: or in the query)
            message = message.replace(secret, MASK)
        return DatabaseTest(False, masked, code=code, message=message)

    try:
        check_database_url(url, origin="the URL")
    except StoreRefusal as refusal:
        return failed(str(refusal.code), refusal.message)
    if not postgres_driver_installed():
        return failed(
            StoreCode.POSTGRES_DRIVER_MISSING.value,
            f"the PostgreSQL driver is not installed: run {INSTALL_HINT}",
        )
    from storage.ledger.postgres_doctor import probe_server
    from storage.ledger.postgres_schema import SCHEMA_VERSION

    try:
        version, schema = probe_server(url.strip())
    except StoreRefusal as refusal:
        return failed(str(refusal.code), refusal.message)
    if schema > SCHEMA_VERSION:
        return failed(
            StoreCode.SCHEMA_NEWER_THAN_PROGRAM.value,
            f"the ledger there has schema version {schema}, newer than this Maka's "
            f"{SCHEMA_VERSION}: upgrade Maka to use it",
        )
    return DatabaseTest(
        True,
        masked,
        server_version=version,
        schema_version=schema,
        program_schema_version=SCHEMA_VERSION,
    )
