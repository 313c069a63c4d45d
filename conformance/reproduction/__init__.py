"""Reproductions: one record of a failure (``record``), one shell script writer (``script``), one
Python replay runner (``runner``), and the suite's adapter from a check's transcript (``suite``).

A suite case, a ``diff`` divergence and a simulator finding all become a ``Reproduction``;
its script and its replay exit 1 when the bug shows, 0 when it does not, 2 when they cannot run
and 3 when a race they cannot force did not show. See docs/conformance.md, "Reproductions".
"""
