"""The decoder's stored validation schema is exactly what pydantic derives from the RuntimeEvent
TypedDicts today, so the TypedDicts stay the one definition of the event shape."""

from __future__ import annotations

import subprocess
import sys

from runtime.ledger import event_core_schema, event_schema_derivation
from runtime.ledger.event_model import event_validator


def test_the_stored_schema_is_the_one_derived_from_the_typed_dicts() -> None:
    derived = event_schema_derivation.derive_core_schema()
    assert derived == event_core_schema.RUNTIME_EVENT_CORE_SCHEMA, (
        "runtime/ledger/event_core_schema.py is stale: regenerate it with "
        "`.venv/bin/python -m runtime.ledger.event_schema_derivation`"
    )


def test_the_generated_module_text_round_trips() -> None:
    text = event_schema_derivation.module_text(event_core_schema.RUNTIME_EVENT_CORE_SCHEMA)
    namespace: dict[str, object] = {}
    exec(compile(text, "event_core_schema.py", "exec"), namespace)
    assert namespace["RUNTIME_EVENT_CORE_SCHEMA"] == event_core_schema.RUNTIME_EVENT_CORE_SCHEMA


def test_the_decoder_validates_with_the_stored_schema_and_does_not_import_pydantic() -> None:
    assert event_validator().get_default_value is not None  # a pydantic_core SchemaValidator
    probe = (
        "import sys\n"
        "import runtime.ledger.event_model as m\n"
        'm.decode_event_json(b\'{"id":"e","sessionId":"s","invocationId":"i",\'\n'
        '    b\'"runId":"r","turnId":"t","ts":1,"partial":false,"role":"user",\'\n'
        '    b\'"author":"user","content":{"kind":"text","text":"hi"}}\')\n'
        "print(sorted(n for n in sys.modules if n == 'pydantic' or n.startswith('pydantic.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "[]"
