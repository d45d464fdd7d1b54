"""The wire formats that cross a process boundary, each declared once, with one writer and one parser.

Standard library only: this package ships to the training containers with training_code/ (sourcedir.tar.gz), is
bundled into the Lambda asset as the top-level package `contract` (stacks/assets/lambda_asset.py) and is imported
by local mode, runctl and the benchmarks from the checkout. One module per format:

- `goodput_line`: the `GOODPUT {json}` log line (hftrain/run/goodput.py -> lambda/goodput, local mode, benchmarks)
- `progress_lines`: the `PROGRESS`, `METRIC` and `[train]`/`[eval]`/`[setup]` log lines and the job's
  MetricDefinitions regexes that read them (hftrain/run -> lambda/plan/job_requests.py, lambda/goodput, local mode)
- `heartbeat`: `_heartbeat.json` (hftrain/stall/watchdog.py -> lambda/watch/stalls.py)
- `stall_records`: `_stalls.json` and the `_stalls/` stack dumps (hftrain/stall -> lambda/goodput, lambda/handlers.py)
- `run_history`: `_progress.json` and `_history.json` (hftrain/checkpoint/history.py -> lambda/watch/durability.py)
- `checkpoint_marker`: `checkpoint-<step>/_complete.<host>.json` (hftrain/checkpoint/manager.py ->
  lambda/watch/durability.py)
- `summary`: the run summary's keys and `summary.json` (lambda/handlers.py -> runctl, local mode)
- `intervals`: the checkpoint interval's bounds (lambda/plan/checkpoint_interval.py, hftrain/checkpoint/interval.py)

`jsontext` is their shared strict JSON reading and writing (bounded size, finite numbers only).
"""
