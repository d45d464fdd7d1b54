"""What `cdk synth` wrote (cdk.out), read without AWS: the stacks, their templates and assets (`reader`), and the
CloudFormation intrinsic functions in them resolved against given physical ids (`intrinsics`).

Standard library only. Below both of its users: local mode (which deploys the templates into its emulator) and
runctl (which reads the synthesized settings and buckets of an environment without credentials).
"""
