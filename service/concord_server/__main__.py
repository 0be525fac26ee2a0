import sys

from .c_heap import choose

choose(sys.argv[1:])  # before .cli imports gRPC and the rest

from .cli import main  # noqa: E402

main()
