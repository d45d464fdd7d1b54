"""Where the training loop tells the stall watchdog (watchdog.py) that it moves: the Trainer callback and start-up."""

from __future__ import annotations

import logging

from transformers import TrainerCallback

from contract import startup_limit
from hftrain.stall import import_watch
from hftrain.stall import injection as stall_injection
from hftrain.stall import watchdog as stall
from hftrain.stall.limits import Limits, parse_minutes

logger = logging.getLogger("hftrain")


def start_watchdog(training_args) -> stall.Watchdog | None:
    """This rank's watchdog per the stall_* hyperparameters (None when stall_minutes is off)."""
    import_watch.stop()  # the watchdog takes over from train.py's first-line watch
    enabled, minutes = parse_minutes(training_args.stall_minutes)
    if not enabled:
        logger.info("stall watchdog: off (stall_minutes off)")
        return None
    startup_minutes = startup_limit.parse(training_args.stall_startup_minutes)
    limits = Limits(minutes=minutes, startup_minutes=startup_minutes,
                    measured_startup=startup_limit.read_measured(training_args.checkpoint_dir),
                    floor_minutes=training_args.stall_floor_minutes,
                    section_factor=training_args.stall_section_factor,
                    section_floor_minutes=training_args.stall_section_floor_minutes)
    return stall.start(limits, checkpoint_dir=training_args.checkpoint_dir,
                       straggler_minutes=training_args.stall_straggler_minutes,
                       straggler_action=training_args.stall_stragglers)


class StallCallback(TrainerCallback):
    """Every optimizer step's end is progress; an injected fault (local mode) fires here."""

    def __init__(self, injection: stall_injection.Injection | None = None) -> None:
        self.injection = injection

    def on_train_begin(self, args, state, control, **kwargs):
        stall.HEART.mark("restore", "startup")
        return control

    def on_step_begin(self, args, state, control, **kwargs):
        stall.HEART.at("forward_backward")
        return control

    def on_step_end(self, args, state, control, **kwargs):
        stall.HEART.step_ends(state.global_step)
        stall_injection.after_step(self.injection, state.global_step)
        return control
