"""Build kproto's Cython extension ``kproto._codec`` (metadata lives in pyproject.toml).

Environment knobs:
    KPROTO_DEBUG=1      -O0 -g with asserts, Cython line tracing (for coverage) and an
                        annotated kproto/_codec.html; forces re-cythonizing
    KPROTO_SANITIZE=1   AddressSanitizer + UndefinedBehaviorSanitizer (for the fuzz tests).
                        Python itself is not instrumented, so preload the runtime:
                        LD_PRELOAD=$(gcc -print-file-name=libasan.so) \\
                        ASAN_OPTIONS=detect_leaks=0 python -m pytest ...
    KPROTO_LIMITED_API=1  Python's Limited API (stable ABI; Cython's limited-API mode):
                        kproto/_codec.abi3.so, wheels tagged cp311-abi3 that load on every
                        CPython >= 3.11. KPROTO_LIMITED_API_VERSION=3.12 raises that floor;
                        3.10 cannot work (the buffer protocol the codec needs joined the
                        Limited API in 3.11). Opt-in: bulk decode/encode cost the same, each
                        call into the module costs more (numbers in wheels/README.md). In
                        place, a leftover _codec.cpython-*.so is imported before the .abi3.so.

No zlib (or any other C library) is needed: the CRCs are in kproto/_crc.h.
"""

import os
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("KPROTO_DEBUG") == "1"
SANITIZE = os.environ.get("KPROTO_SANITIZE") == "1"
LIMITED_API = os.environ.get("KPROTO_LIMITED_API") == "1"
LIMITED_MAJOR, LIMITED_MINOR = (
    int(p) for p in os.environ.get("KPROTO_LIMITED_API_VERSION", "3.11").split(".")[:2])

compile_args = ["-O0", "-g", "-UNDEBUG"] if DEBUG else ["-O3"]
compile_args.append("-Wno-unused-function")  # helpers shared by the .pxi fragments
link_args = []
if SANITIZE:
    flags = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
             "-fno-omit-frame-pointer"]
    compile_args += flags + ["-g"]
    link_args += flags

macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
if DEBUG:
    macros += [("CYTHON_TRACE", "1"), ("CYTHON_TRACE_NOGIL", "1")]
options = {}
if LIMITED_API:
    macros.append(("Py_LIMITED_API", f"0x{LIMITED_MAJOR:02X}{LIMITED_MINOR:02X}0000"))
    # The unchecked bytes macros the codec uses are not in the Limited API: their checked
    # function twins are (a missing one must fail the build, not the import).
    macros += [("PyBytes_AS_STRING", "PyBytes_AsString"), ("PyBytes_GET_SIZE", "PyBytes_Size"),
               # _rows.pxi fills fresh tuples (refcount 1, as PyTuple_SetItem requires)
               ("PyTuple_SET_ITEM", "PyTuple_SetItem")]
    compile_args.append("-Werror=implicit-function-declaration")
    options["bdist_wheel"] = {"py_limited_api": f"cp{LIMITED_MAJOR}{LIMITED_MINOR}"}

extensions = [
    Extension(
        "kproto._codec",
        ["kproto/_codec.pyx"],
        include_dirs=["kproto", numpy.get_include()],
        define_macros=macros,
        extra_compile_args=compile_args,
        extra_link_args=link_args,
        py_limited_api=LIMITED_API,
        depends=["kproto/_crc.h", *sorted(str(p) for p in Path("kproto").glob("*.pxi"))],
    ),
    # the Avro decoder loop (kproto/formats/avro.py runs it)
    Extension(
        "kproto._avro",
        ["kproto/_avro.pyx"],
        include_dirs=["kproto", numpy.get_include()],
        define_macros=macros,
        extra_compile_args=compile_args,
        extra_link_args=link_args,
        py_limited_api=LIMITED_API,
        depends=["kproto/_avro_out.pxi", "kproto/_avro_enc.pxi", "kproto/_wire.pxi"],
    ),
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
        force=DEBUG,  # the .c of a release build has no trace calls to switch on
    ),
    options=options,
)
