"""The protocol profiles, one package each; ``conformance.installed.PROFILES`` lists them by name.

A new profile adds one line there (see docs/conformance.md, "Writing a profile").
"""
