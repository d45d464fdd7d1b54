"""Local mode: the pipeline's AWS services emulated in-process, SageMaker jobs run on this machine.

Kept free of imports: the torchrun wrapper and job subprocesses import nothing from here.
"""
