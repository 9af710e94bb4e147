"""The one thing pyproject.toml cannot say on every setuptools we meet: the C record walk.

Why: ``storage/_record_walk.c`` is the produce path's record walk (issue 9's 15% throughput
bound); ``pip install -e '.[test]'`` builds it in place. Everything else about the package is
in pyproject.toml. Without a compiler the build fails loudly rather than silently shipping the
slower walk; ``storage.record_walk`` still falls back to Python in a checkout never built.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "pykraft.storage._record_walk",
            sources=["storage/_record_walk.c"],
            extra_compile_args=["-O2", "-Wall", "-Wextra"],
        )
    ]
)
