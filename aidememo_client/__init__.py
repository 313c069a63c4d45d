"""aidememo_client: an httpx client for any AideMemo server, and its recovery planner."""
