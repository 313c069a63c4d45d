"""aidememo_wire: the AideMemo wire protocol's pure definitions (ids, canonical JSON, error codes, shapes)."""
