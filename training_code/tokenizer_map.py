"""Tokenizer map job: count the words of this host's shard (SageMaker Processing, ShardedByS3Key input).

    python tokenizer_map.py --tokenizer-type bpe|wordpiece --text-field text [--lowercase true|false]
        [--input-dir /opt/ml/processing/input/data] [--output-dir /opt/ml/processing/output/counts]

Reads text/jsonl/parquet files under the input dir (this host's objects only), applies the tokenizer type's
normalizer and pre-tokenizer on all cores, and writes `counts-<current_host>.partNNNNN.parquet` (host from
/opt/ml/config/resourceconfig.json). `SAGEMAKER_BASE_DIR` replaces /opt/ml in the default paths. The
vocabulary settings of the reduce are accepted too, so that bad values fail here, before any work.
See docs/tokenizer.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ["TOKENIZERS_PARALLELISM"] = "true"  # counting runs on all cores (Rust threads)

from tokenizer_mr.container import JobError, default_path, run_main  # noqa: E402
from tokenizer_mr.jobs import DEFAULT_CHUNK_CHARS, run_map  # noqa: E402
from tokenizer_mr.reader import FORMATS  # noqa: E402
from tokenizer_mr.settings import SettingsError, add_settings_arguments, settings_from_args  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_settings_arguments(p, reduce=False)
    io = p.add_argument_group("paths")
    io.add_argument("--input-dir", default=None, help="default: <base>/processing/input/data")
    io.add_argument("--output-dir", default=None, help="default: <base>/processing/output/counts")
    io.add_argument("--input-format", choices=FORMATS, default="auto", help="auto: from the file extension")
    io.add_argument("--chunk-chars", type=int, default=DEFAULT_CHUNK_CHARS,
                    help="write a counts part after this many characters (bounds the map's memory)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> str:
        try:
            settings = settings_from_args(args).validate(for_reduce=False)
        except SettingsError as exc:
            raise JobError(str(exc)) from None
        if args.chunk_chars < 1:
            raise JobError("--chunk-chars must be >= 1")
        summary = run_map(
            settings,
            Path(args.input_dir or default_path("processing/input/data")),
            Path(args.output_dir or default_path("processing/output/counts")),
            input_format=args.input_format,
            chunk_chars=args.chunk_chars,
        )
        return summary.line()

    return run_main("tokenizer-map", body)


if __name__ == "__main__":
    sys.exit(main())
