"""The workspace checkpoint carrier: snapshots of a session's folder in a private Git store,
their presence, verification, retention, restore and transfer with an export."""
