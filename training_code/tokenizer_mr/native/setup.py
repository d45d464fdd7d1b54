"""Builds bpe_merge.c as a plain shared library (tokenizer_mr_native/libbpe_merge.so) in a py3-none wheel.

The library uses no Python API (ctypes loads it), so its file name carries no ABI suffix and the wheel is tagged
for any CPython 3 on the build's platform. Flags: C99, -O2, no debug information and build paths mapped away, so
the bytes depend only on the source and the compiler. The source's SHA-256 is built in (`bpe_merge_source()`), so a
stale installation can be told from a current one.
"""

import hashlib
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
# Build files go to a temporary folder, never beside the source: this folder ships in the code bundle as it is.
SCRATCH = tempfile.mkdtemp(prefix="tokenizer-mr-native-")
SOURCE_SHA256 = hashlib.sha256((HERE / "bpe_merge.c").read_bytes()).hexdigest()


class PlainLibrary(build_ext):
    def get_ext_filename(self, fullname: str) -> str:
        return fullname.replace(".", "/") + ".so"


class AnyPython3(bdist_wheel):
    def get_tag(self) -> tuple[str, str, str]:
        return "py3", "none", super().get_tag()[2]


setup(
    ext_modules=[Extension(
        "tokenizer_mr_native.libbpe_merge", sources=["bpe_merge.c"],
        define_macros=[("SOURCE_SHA256", f'"{SOURCE_SHA256}"')],
        extra_compile_args=["-std=c99", "-O2", "-g0", "-Wall", "-Wextra", f"-ffile-prefix-map={HERE}=."],
    )],
    cmdclass={"build_ext": PlainLibrary, "bdist_wheel": AnyPython3},
    options={"build": {"build_base": f"{SCRATCH}/build"}, "egg_info": {"egg_base": SCRATCH}},
)
