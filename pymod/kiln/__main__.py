"""`python -m kiln COMMAND`: demo (the seed's multiply_them, end to end)."""
import argparse
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m kiln")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="compile and run the seed's multiply_them")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from . import demo
        return demo.main()
    return 2


if __name__ == "__main__":
    sys.exit(main())
