"""How the training code's reader treats the objects of a data channel, said the same way by the job and Prepare.

Producer of the rules: the training code's reader (hftrain/data/files.py: which objects it reads, which it skips
and why, a CSV file that is really tab-separated). Consumers: Prepare's data check (lambda/data/preflight.py,
sample_parsing.py), which refuses or lists the same objects with the same reasons before any job starts, and the
job's data coverage (hftrain/data/coverage.py), which the run summary prints.
"""

from __future__ import annotations

# why an object of a channel is not read (the extension table itself: hftrain.data.files.EXTENSIONS, exported in
# hyperparameters.json)
MARKER_REASON = "a name starting with . or _ (never read)"
UNKNOWN_REASON = "an extension the reader does not take"

TAB_SEPARATED = ("this file is tab-separated, but its name ends in .csv and the reader takes .csv files as "
                 "comma-separated: save it with commas (or as JSON lines)")


def tab_separated(header: str) -> bool:
    """Whether the first line of a `.csv` file is tab-separated: it has tabs and more of them than commas."""
    line = header.split("\n", 1)[0]
    return "\t" in line and line.count("\t") > line.count(",")
