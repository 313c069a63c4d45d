"""Checks of the toy profile."""
