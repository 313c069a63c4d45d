"""Checks of the ``aidememo-remote`` profile, one module per requirement family."""
