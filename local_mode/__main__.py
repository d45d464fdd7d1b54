"""Local mode CLI: the pipeline offline on this machine, from what `cdk synth` wrote.

  python -m local_mode demo [--interrupt-at-step N]
  python -m local_mode run SPEC.json [--data DIR] [--interrupt-at-step N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from local_mode.cloud_assembly import AssemblyError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local_mode", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cdk-out", type=Path, default=Path("cdk.out"), help="synthesized app (make synth)")
    parser.add_argument("--work-dir", type=Path, default=None, help="default: .local-runs/<time>")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="tokenizer stage + QA fine-tuning on 2 hosts with a spot interruption")
    demo.add_argument("--interrupt-at-step", type=int, default=100)
    run = sub.add_parser("run", help="run any run spec locally")
    run.add_argument("spec", type=Path)
    run.add_argument("--data", type=Path, help="folder uploaded to the data bucket's root first "
                                                "(e.g. DIR/datasets/x/ -> s3://<data>/datasets/x/)")
    run.add_argument("--interrupt-at-step", type=int, default=None,
                     help="inject one spot interruption at this training step (also: spec local.interrupt_at_step)")
    args = parser.parse_args(argv)
    work_dir = args.work_dir or Path(".local-runs") / time.strftime("%Y%m%d-%H%M%S")
    try:
        if args.command == "demo":
            from local_mode.demo import run_demo

            outcome = run_demo(args.cdk_out, work_dir, interrupt_at_step=args.interrupt_at_step)
        else:
            outcome = _run(args.cdk_out, work_dir, args.spec, args.data, args.interrupt_at_step)
    except AssemblyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0 if outcome.status == "SUCCEEDED" else 1


def _run(cdk_out: Path, work_dir: Path, spec_path: Path, data: Path | None, interrupt: int | None):  # noqa: ANN202
    from local_mode.report import write_report
    from local_mode.session import LocalSession

    try:
        spec = json.loads(spec_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        print(f"error: {spec_path}: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc
    with LocalSession(cdk_out, work_dir) as session:
        if data:
            print(f"uploaded {session.upload_folder(data)} files from {data}")
        outcome = session.run_spec(spec, interrupt_at_step=interrupt)
        if outcome.status == "SUCCEEDED":
            result = outcome.output["result"]
            model_dir = session.download_model(result["model_uri"], work_dir / "artifacts")
            print(f"run SUCCEEDED: model {result['model_uri']} -> {model_dir}; report "
                  f"{write_report(work_dir / 'report', outcome, model_dir)}")
        else:
            print(f"run {outcome.status}: {outcome.error}\n{outcome.cause}")
    return outcome


if __name__ == "__main__":
    sys.exit(main())
