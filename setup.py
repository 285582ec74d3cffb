"""Build kproto's Cython extension ``kproto._codec``.

Environment knobs:
    KPROTO_DEBUG=1      -O0 -g, Cython line tracing and annotated HTML
    KPROTO_SANITIZE=1   AddressSanitizer + UndefinedBehaviorSanitizer (for the fuzzers)
"""

import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("KPROTO_DEBUG") == "1"
SANITIZE = os.environ.get("KPROTO_SANITIZE") == "1"

compile_args = ["-O0", "-g"] if DEBUG else ["-O3"]
link_args = []
if SANITIZE:
    flags = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"]
    compile_args += flags + ["-g"]
    link_args += flags
macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
if DEBUG:
    macros.append(("CYTHON_TRACE_NOGIL", "1"))

extensions = [
    Extension(
        "kproto._codec",
        ["kproto/_codec.pyx"],
        include_dirs=["kproto", numpy.get_include()],
        define_macros=macros,
        extra_compile_args=compile_args + ["-Wno-unused-function"],
        extra_link_args=link_args,
        depends=["kproto/_crc.h", "kproto/_records.pxi", "kproto/_encode.pxi",
                 "kproto/_fetch.pxi"],
    )
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
            "linetrace": DEBUG,
        },
        annotate=DEBUG,
    ),
)
