"""The SQLite ledger store: schema and migrations, the narrow writers (T1, T2, recovery bundles,
run endings, continuation claims, attestations, workspace facts), run headers and projections,
opening, verifying and repairing the database."""
