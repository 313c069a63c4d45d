"""The optional compiled checker kernel (simulations/linearizability/_native.c and _native_scan.c).

Built when a C compiler is present; without one the install goes on and the checker uses its
pure-Python path, which gives the same verdicts (tests/sim/test_native.py holds them equal).
``AIDEMEMO_NO_EXTENSIONS=1`` at build time builds no kernel at all: a pure ``py3-none-any``
wheel, for platforms no compiled wheel covers (aio-libs' ``*_NO_EXTENSIONS`` convention).
"""

import os

from setuptools import Extension, setup

KERNEL = Extension("simulations.linearizability._native", ["simulations/linearizability/_native.c", "simulations/linearizability/_native_scan.c"],
                   optional=True, extra_compile_args=["-O2"])

setup(ext_modules=[] if os.environ.get("AIDEMEMO_NO_EXTENSIONS") else [KERNEL])
