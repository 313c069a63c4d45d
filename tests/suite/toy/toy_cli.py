"""A toy command-line protocol for the profile plug-in tests (run as a script, never imported).

    TOY_STATE=DIR TOY_TOKEN=T toy_cli.py [--broken] echo WORDS...   prints WORDS
    TOY_STATE=DIR TOY_TOKEN=T toy_cli.py [--broken] shout WORDS...  prints WORDS in upper case

A token not listed in DIR/tokens exits 3 and names the token on stderr, so a report that
failed to redact it would show. ``--broken`` lower-cases what echo prints and exits 1 for an unknown token.
"""

import os
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    broken = argv[:1] == ["--broken"]
    argv = argv[1:] if broken else argv
    tokens = Path(os.environ.get("TOY_STATE", "/nonexistent")) / "tokens"
    token = os.environ.get("TOY_TOKEN", "")
    if not token or token not in (tokens.read_text().split() if tokens.exists() else []):
        sys.stderr.write(f"toy: unknown token {token!r}\n")
        return 1 if broken else 3
    verb, *words = argv or ["help"]
    text = " ".join(words)
    if verb == "echo":
        print(text.lower() if broken else text)
    elif verb == "shout":
        print(text.upper())
    else:
        sys.stderr.write(f"toy: unknown verb {verb!r}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
