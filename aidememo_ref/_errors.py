"""The reference server's one exception root; every error of the package derives from it.

    AideMemoRefError
    ├── ProvisionError       bootstrap refused (``_provision``)
    ├── StoreError           a database the reference cannot use: a damaged or foreign file, an
    │                        unreachable PostgreSQL (``_provision``)
    ├── RecordError          a stored body that is not its kind's record; also a ValueError (``_records``)
    ├── BindingsError        a bad ``--auth-bindings-file`` or ``bind_token`` id (``_gateway``)
    └── the request path's own signals, which never leave the package: ``MembershipChanged``
        (``_store``), ``ParamsError`` and the gateway's failures (``_gateway``), the decoder's (``_decode``)

A command the rules refuse is not an error of this package: it is the wire's ``LedgerError``
(``aidememo_wire``), answered over HTTP.
"""

from __future__ import annotations

__all__ = ["AideMemoRefError"]


class AideMemoRefError(Exception):
    """Root of every exception the reference server defines."""
