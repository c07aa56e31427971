"""Pieces every runtime layer above the ledger contract may share: the cancel token of a turn
and the decision of a run's checkpoint mode. Imports only the standard library and
``runtime/ledger``."""
