"""PyCUDA's debug module: `python -m kiln.debug script.py [args]` runs the script with every
kernel compiled for device debugging (-G), ready for cuda-gdb or compute-sanitizer. Importing
kiln.debug turns device debugging on for the rest of the process (kiln.driver.set_debugging).
"""
import argparse
import os
import runpy
import sys

from . import driver

driver.set_debugging()


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m kiln.debug",
        description="Run a Python script with every CUDA kernel compiled for device debugging.")
    parser.add_argument("script", help="the script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    options = parser.parse_args(argv)
    if not os.path.isfile(options.script):
        parser.error(f"{options.script} does not exist")
    sys.argv = [options.script, *options.args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(options.script)))
    runpy.run_path(options.script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
