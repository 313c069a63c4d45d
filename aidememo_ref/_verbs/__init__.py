"""``aidememo-ref bootstrap`` and ``aidememo-ref serve``: the reference server's command line."""
