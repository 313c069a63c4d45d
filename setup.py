"""The optional compiled checker kernel (simulations/_native.c and _native_scan.c).

Built when a C compiler is present; without one the install goes on and the checker uses its
pure-Python path, which gives the same verdicts (tests/sim/test_native.py holds them equal).
"""

from setuptools import Extension, setup

KERNEL = Extension("simulations._native", ["simulations/_native.c", "simulations/_native_scan.c"],
                   optional=True, extra_compile_args=["-O2"])

setup(ext_modules=[KERNEL])
