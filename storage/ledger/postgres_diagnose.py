"""The doctor's report of the ledger on PostgreSQL (``PostgresLedgerStore.diagnose``): the
schema version against this program's, then the SQLite doctor's engine-free checks
(``store_doctor.check_ledger``) over the ``sqlite3``-shaped connection, so a damaged row gets the
same code on both engines. SQLite's ``integrity_check`` and ``foreign_key_check`` have no
counterpart: the server enforces its constraints itself.
"""

from __future__ import annotations

import sqlite3
from typing import cast

from runtime.ledger.codes import DoctorCode
from storage.ledger.postgres_connection import PostgresConnection
from storage.ledger.postgres_schema import SCHEMA_VERSION, read_version
from storage.ledger.store_doctor import DoctorProblem, DoctorReport, check_ledger


def diagnose_postgres(conn: sqlite3.Connection) -> DoctorReport:
    """The schema version against this program's, then ``check_ledger`` (see the module)."""
    report = DoctorReport(read_version(cast(PostgresConnection, conn)), SCHEMA_VERSION)
    if report.schema_version != SCHEMA_VERSION:
        report.problems.append(
            DoctorProblem(
                DoctorCode.SCHEMA_VERSION_MISMATCH,
                f"schema {report.schema_version}, program {SCHEMA_VERSION}",
            )
        )
    report.integrity = ["not applicable: the server enforces its constraints"]
    check_ledger(conn, report)
    return report
