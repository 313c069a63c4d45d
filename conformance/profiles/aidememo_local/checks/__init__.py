"""Checks of the aidememo-local profile (one module per requirement family)."""
