"""The optional compiled checker kernel (simulations/_native.c).

Built when a C compiler is present; without one the install goes on and the checker uses its
pure-Python path, which gives the same verdicts (tests/sim/test_native.py holds them equal).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("simulations._native", ["simulations/_native.c"], optional=True,
                             extra_compile_args=["-O2"])])
