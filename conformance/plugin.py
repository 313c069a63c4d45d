"""pytest11 entry point of the AideMemo conformance suite (placeholder until the suite lands)."""
