"""The native parts of chaoskraft; everything else is declared in pyproject.toml."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("checkers._wgl", ["checkers/_wgl.c"],
                             extra_compile_args=["-std=c99", "-Wall", "-Wextra",
                                                 "-Wno-unused-parameter", "-Wno-missing-field-initializers"])])
