#!/bin/sh
# Build kproto's Cython extension into a separate copy of the tree, for fuzzing:
#
#   tests/fuzz/build.sh cov  [DIR]   clang -fsanitize=fuzzer-no-link: libFuzzer (inside
#                                    atheris) sees the Cython code's edges and comparisons
#   tests/fuzz/build.sh asan [DIR]   the same plus KPROTO_SANITIZE=1 (ASan + UBSan, setup.py),
#                                    and DIR/asan_with_fuzzer.so: clang's ASan runtime with
#                                    libFuzzer linked in, for LD_PRELOAD (as atheris's own
#                                    source build makes it: the ASan runtime's weak coverage
#                                    hooks would otherwise swallow the extension's edges)
#
# DIR defaults to /tmp/kproto-fuzz-<variant>; the dev build in the checkout is left alone.
# Needs clang (CLANG=clang-14 by default; Debian: apt-get install clang-14). An instrumented
# _codec only imports after atheris's libFuzzer is loaded with RTLD_GLOBAL (tests/fuzz/run.py
# does that); the asan variant also needs the ASan runtime preloaded (run.py --asan).
set -eu
variant=${1:?usage: build.sh cov|asan [DIR]}
src=$(cd "$(dirname "$0")/../.." && pwd)
dest=${2:-/tmp/kproto-fuzz-$variant}
py=${PYTHON:-$src/.venv/bin/python}
cc=${CLANG:-clang-14}
mkdir -p "$dest"
rm -rf "$dest/kproto" "$dest/build"
# the package without build products (.so, generated .c, caches)
(cd "$src" && tar cf - --exclude='*.so' --exclude='_codec.c' --exclude='_avro.c' \
    --exclude='_codec.html' \
    --exclude=__pycache__ kproto setup.py pyproject.toml) | (cd "$dest" && tar xf -)
case $variant in
  cov)  ;;
  asan) export KPROTO_SANITIZE=1 ;;
  *) echo "unknown variant $variant (cov or asan)" >&2; exit 2 ;;
esac
export CC="$cc" LDSHARED="$cc -shared" CFLAGS="-fsanitize=fuzzer-no-link"
cd "$dest"
"$py" setup.py -q build_ext --inplace >build.log 2>&1 || { cat build.log >&2; exit 1; }
if [ "$variant" = asan ]; then
  rt=$(dirname "$("$cc" -print-file-name=libclang_rt.asan-x86_64.a)")
  rm -rf rt && mkdir rt && cp "$rt/libclang_rt.asan-x86_64.a" rt/asan.a
  ar d rt/asan.a asan_preinit.cpp.o          # .preinit_array is not allowed in a DSO
  "$cc" -shared -o asan_with_fuzzer.so -Wl,--whole-archive rt/asan.a \
      "$rt/libclang_rt.asan_cxx-x86_64.a" "$rt/libclang_rt.fuzzer_no_main-x86_64.a" \
      -Wl,--no-whole-archive -lpthread -ldl -lrt -lm -lstdc++
  rm -rf rt
fi
echo "$dest"
