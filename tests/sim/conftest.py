"""The simulator's tests. Hypothesis profiles (dev, ci, deep) live in ``tests/conftest.py`` and
are chosen with ``--hypothesis-profile``."""
