"""What the jobs and Lambdas run, resolved at synth: image URIs, the images' contents, bundled wheels, the code tarball and the Lambda asset."""
