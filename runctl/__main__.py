import os
import sys

from runctl.cli import main

try:
    code = main()
    sys.stdout.flush()
except BrokenPipeError:
    # `runctl logs ... | head`: the reader went away; that is how a pipe ends, not an error. Python's docs (signal,
    # "Note on SIGPIPE") point stdout at devnull so the interpreter's own flush at exit does not raise again.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    code = 0
sys.exit(code)
