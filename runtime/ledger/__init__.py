"""The RuntimeEvent v1 ledger contract (docs/design/ledger.md): events, canonical codec, lanes,
scanner, recovery-bundle rules and the store ports. Imports only the standard library, pydantic
and rfc8785.
"""
