"""Tokenizer reduce job: merge the map's word counts and learn the vocabulary (SageMaker Processing, 1 host).

    python tokenizer_reduce.py --tokenizer-type bpe|wordpiece --text-field text [--lowercase true|false]
        --vocab-size N [--min-frequency N] [--special-tokens '<JSON list>'] [--model-max-length N]
        [--input-dir /opt/ml/processing/input/counts] [--output-dir /opt/ml/processing/output/tokenizer]

The vocabulary and merges equal those of `tokenizers`' single-node trainer on the whole corpus. Writes
tokenizer.json, tokenizer_config.json and the vocabulary files (`AutoTokenizer.from_pretrained(output_dir)`).
`SAGEMAKER_BASE_DIR` replaces /opt/ml in the default paths. See docs/tokenizer.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tokenizer_mr.container import JobError, default_path, run_main
from tokenizer_mr.jobs import run_reduce
from tokenizer_mr.settings import SettingsError, add_settings_arguments, settings_from_args


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_settings_arguments(p, reduce=True)
    io = p.add_argument_group("paths")
    io.add_argument("--input-dir", default=None, help="default: <base>/processing/input/counts")
    io.add_argument("--output-dir", default=None, help="default: <base>/processing/output/tokenizer")
    io.add_argument("--skip-memory-check", action="store_true",
                    help="learn even when the estimated memory exceeds what is available")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> str:
        try:
            settings = settings_from_args(args).validate(for_reduce=True)
        except SettingsError as exc:
            raise JobError(str(exc)) from None
        summary = run_reduce(
            settings,
            Path(args.input_dir or default_path("processing/input/counts")),
            Path(args.output_dir or default_path("processing/output/tokenizer")),
            skip_memory_check=args.skip_memory_check,
        )
        return summary.line()

    return run_main("tokenizer-reduce", body)


if __name__ == "__main__":
    sys.exit(main())
