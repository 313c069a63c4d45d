# The toy profile's checks run only through the toy profile (tests/suite/test_profiles.py).
collect_ignore = ["toy"]
