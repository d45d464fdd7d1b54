#!/bin/bash
# SageMaker Processing entrypoint for the training code (like the SageMaker SDK's FrameworkProcessor runproc.sh):
#   ContainerEntrypoint ["/bin/bash", "/opt/ml/processing/input/code/runproc.sh"]
#   ContainerArguments  ["tokenizer_map.py", "--tokenizer-type", "bpe", ...]
# Unpacks sourcedir.tar.gz in the code directory, installs requirements-processing.txt from the wheels shipped in
# it (never from an index: the job's subnet may reach none), then runs `python "$@"` there.
#   RUNPROC_CODE_DIR   code directory (default: ${SAGEMAKER_BASE_DIR:-/opt/ml}/processing/input/code)
#   RUNPROC_SKIP_PIP=1 skip the install (local mode and tests, whose environment already has the packages)
#   RUNPROC_PYTHON     interpreter (default: python, else python3)
# The body is one function, read whole before it runs: the tarball may hold (and overwrite) this very file.

main() {
    set -e
    local base_dir="${SAGEMAKER_BASE_DIR:-/opt/ml}"
    local code_dir="${RUNPROC_CODE_DIR:-${base_dir}/processing/input/code}"
    cd "${code_dir}"

    if [ -f sourcedir.tar.gz ]; then
        tar -xzf sourcedir.tar.gz
    fi

    local python_bin="${RUNPROC_PYTHON:-}"
    if [ -z "${python_bin}" ]; then
        if command -v python >/dev/null 2>&1; then python_bin=python; else python_bin=python3; fi
    fi

    if [ -f requirements-processing.txt ] && [ "${RUNPROC_SKIP_PIP:-0}" != "1" ]; then
        echo "runproc: installing requirements-processing.txt from wheels/ (no index)"
        "${python_bin}" -m pip install --disable-pip-version-check --no-input --no-index --no-deps \
            --find-links wheels -r requirements-processing.txt
    fi

    if [ "$#" -eq 0 ]; then
        echo "runproc: no script given (ContainerArguments must start with the script name)" >&2
        exit 2
    fi

    echo "runproc: ${python_bin} $*"
    exec "${python_bin}" "$@"
}

main "$@"
