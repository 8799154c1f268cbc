"""llama-cpp-python's OpenAI-compatible server (`python -m llama_cpp.server`, same arguments)
with llama.cpp's extra buffer types turned off: the weight repacking that llama.cpp's own
server turns off with `--no-repack`, which llama-cpp-python's settings do not offer. On
processors with AMX the repacked weights crash on any prompt of more than one token.

Run with the Python of .venv-model (requirements-model.txt); the suite's own virtualenv has no
llama_cpp.
"""

from __future__ import annotations

import llama_cpp.llama_cpp as bindings
from llama_cpp.server.__main__ import main

default_model_params = bindings.llama_model_default_params


def model_params_without_repack() -> bindings.llama_model_params:
    """llama.cpp's defaults for loading a model, with `use_extra_bufts` off (`--no-repack`)."""
    params = default_model_params()
    params.use_extra_bufts = False
    return params


if __name__ == "__main__":
    # `Llama` builds its model parameters from this function (llama_cpp/llama.py).
    bindings.llama_model_default_params = model_params_without_repack
    main()
