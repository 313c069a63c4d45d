"""AideMemo conformance suite: a pytest plugin and a command line."""
