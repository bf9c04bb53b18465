"""MkDocs hook: ``torch_ppo.train``'s reference, made from the function itself at build time.

Its argument text is ``torch_ppo.arguments.TRAIN_DOC``, assigned to the function when ``torch_ppo.train`` is
imported, so signature and text are read from the imported function, not from the source file a static reader
sees. A page asks for it with the line ``<!-- torch-ppo-train -->``.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

PLACEHOLDER = "<!-- torch-ppo-train -->"
ROOT = Path(__file__).resolve().parents[2]


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if PLACEHOLDER not in markdown:
        return markdown
    return markdown.replace(PLACEHOLDER, reference())


def _parameter(parameter: inspect.Parameter) -> str:
    annotation = parameter.annotation if isinstance(parameter.annotation, str) else inspect.formatannotation(
        parameter.annotation)
    text = f"{parameter.name}: {annotation}" if parameter.annotation is not inspect.Parameter.empty else parameter.name
    if parameter.default is inspect.Parameter.empty:
        return text
    default = "<lambda>" if callable(parameter.default) else repr(parameter.default)
    return f"{text} = {default}"


def reference() -> str:
    """The signature as a code block, then the function's own text."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import torch_ppo

    signature = inspect.signature(torch_ppo.train)
    lines = ["```python", "torch_ppo.train("]
    lines += [f"    {_parameter(p)}," for p in signature.parameters.values()]
    lines += [f") -> {signature.return_annotation}", "```", "", inspect.getdoc(torch_ppo.train)]
    return "\n".join(lines)
