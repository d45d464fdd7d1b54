"""One training run start to finish: the runner and its phases, the Trainer subclass and callbacks, progress and goodput reports, model loading and export, failure files."""
