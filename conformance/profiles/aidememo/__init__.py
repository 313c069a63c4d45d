"""The ``aidememo-remote`` profile: the AideMemo handoff protocol over HTTP (``aidememo-server``)."""
