"""python -m kiln.ops build NAME SOURCES... : builds a custom-op library ahead of time.

Prints the library's path (the cache entry a later ``CustomOpBuilder(...).load()`` with the same
arguments finds without compiling). Exit status 1 with the compiler's diagnostics on a failure.
"""

import argparse
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m kiln.ops",
                                     description="Build Kiln custom-op libraries.")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="compile NAME from SOURCES into the cache")
    build.add_argument("name")
    build.add_argument("sources", nargs="+")
    build.add_argument("-I", "--include-path", action="append", default=[], dest="include_paths")
    build.add_argument("--cflag", action="append", default=[], dest="cflags",
                       help="a compiler flag (repeat for several; write --cflag=-DX for dashes)")
    build.add_argument("--ldflag", action="append", default=[], dest="ldflags")
    build.add_argument("--build-dir", default=None, help="cache root (default: KILN_EXTENSION_DIR "
                       "or ~/.cache/kiln/extensions)")
    build.add_argument("--backend", default="CPU")
    build.add_argument("--debug", action="store_true", help="-O0 -g instead of -O2")
    build.add_argument("-v", "--verbose", action="store_true", help="print every command")
    args = parser.parse_args(argv)

    from ..errors import KilnError
    from ._builder import CustomOpBuilder

    try:
        builder = CustomOpBuilder(args.name, args.sources, backend=args.backend,
                                  include_paths=args.include_paths, cflags=args.cflags,
                                  ldflags=args.ldflags, build_dir=args.build_dir,
                                  debug=args.debug, verbose=args.verbose)
        print(builder.build())
    except (KilnError, OSError, ValueError) as e:
        print(f"python -m kiln.ops: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
