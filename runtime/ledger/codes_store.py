"""The database's refusals and the run endings (``runs.failure_class``): the codes a read-only
listing of sessions needs (``maka sessions`` loads no other).

Part of ``runtime/ledger/codes.py`` (import the codes from there): append-only, never rename a
member or reuse a value for another meaning."""

from __future__ import annotations

from enum import StrEnum


class StoreCode(StrEnum):
    """Database-level refusals."""

    SCHEMA_NEWER_THAN_PROGRAM = "schema_newer_than_program"
    STORE_LOCKED = "store_locked"
    STORE_CORRUPT = "store_corrupt"
    # A read-only open found no database, or one that needs a migration it may not perform.
    STORE_NOT_FOUND = "store_not_found"
    SCHEMA_UPGRADE_REQUIRED = "schema_upgrade_required"
    STORE_READ_ONLY = "store_read_only"
    STORE_IO_FAILED = "store_io_failed"
    # The disk (or the user's quota) is full; the data folder, its lock or database file cannot
    # be written. Never ``store_locked``: nobody else holds anything.
    DISK_FULL = "disk_full"
    DATA_DIR_READ_ONLY = "data_dir_read_only"
    # Run headers and sessions.
    SESSION_NOT_FOUND = "session_not_found"
    RUN_NOT_FOUND = "run_not_found"
    EVENT_NOT_FOUND = "event_not_found"
    RUN_STATUS_CONFLICT = "run_status_conflict"
    # A function_response or recovery bundle for an operation the store never prepared.
    OPERATION_NOT_FOUND = "operation_not_found"
    # Removing a session that other sessions were branched from (their history is its prefix).
    SESSION_HAS_BRANCHES = "session_has_branches"
    # A new title for a session that is not one line of 1 to 200 characters (``maka sessions
    # rename``, the desktop's Rename).
    SESSION_TITLE_INVALID = "session_title_invalid"
    # The writer's session lease is not (or no longer) its own: another host took the session
    # over, or the lease ran out before a T1 or an admission (docs/postgres.md). Nothing was
    # committed.
    SESSION_LEASE_LOST = "session_lease_lost"
    # The database URL (``MAKA_DATABASE_URL`` or the desktop's Database setting) is not a
    # PostgreSQL URL Maka can use: another scheme, no host, a port that is not a number.
    DATABASE_URL_INVALID = "database_url_invalid"
    # A PostgreSQL URL is selected but the driver (the ``postgres`` extra, psycopg 3) is not
    # installed.
    POSTGRES_DRIVER_MISSING = "postgres_driver_missing"
    # The data folder's ``settings.json`` exists but is not a JSON object (a hand edit left it
    # broken): its Database choice cannot be read, so no ledger is opened rather than guessing
    # (a PostgreSQL choice read as "this computer" would start a second ledger).
    SETTINGS_DAMAGED = "settings_damaged"
    # The database user may not read or write Maka's tables (PostgreSQL: a ledger another user
    # created and granted nothing on, or a schema it may not create tables in). Nothing changed.
    DATABASE_ACCESS_DENIED = "database_access_denied"


class FailureClass(StrEnum):
    """Run endings (``stateDelta.failureClass`` of a terminal event, ``runs.failure_class``)."""

    APP_RESTARTED = "app_restarted"
    PROVIDER_ERROR = "provider_error"
    TOOL_BOUNDARY_FAILED = "tool_boundary_failed"
    CANCELLED_BY_USER = "cancelled_by_user"
    CONTINUATION_REVALIDATION_FAILED = "continuation_revalidation_failed"
