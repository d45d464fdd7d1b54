"""Checkpoints you can trust: markers with content hashes, verification, rotation, resume, the save interval, run history and full-volume errors."""
