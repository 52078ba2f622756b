"""Text shown to people: the display form of CoreNLP-tokenized text, control characters removed.

Tokenization for models is ``core.data.pipeline`` (the one text pipeline).
"""
from __future__ import annotations

import re
import unicodedata

_NO_SPACE_BEFORE = re.compile(r" ([?.,!;:%)\]}]|'s|'re|'ve|'ll|'d|'m|n't|')(?=\s|$)")
_NO_SPACE_AFTER = re.compile(r"([(\[{$]) ")
_UNESCAPE = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}"}
_BRACKETS = re.compile("|".join(map(re.escape, _UNESCAPE)))
_CONTROL = {"Cc", "Cf", "Cs", "Co", "Cn"}


def display_form(tokenized: str) -> str:
    """Undo CoreNLP tokenization for display: ``"How do I ... ?"`` -> ``"How do I ...?"``.

    The original text is kept for modelling; this form is only shown to people.
    """
    text = _BRACKETS.sub(lambda m: _UNESCAPE[m.group(0)], tokenized)
    text = _NO_SPACE_BEFORE.sub(r"\1", text)
    text = _NO_SPACE_BEFORE.sub(r"\1", text)  # second pass for stacked punctuation ("? ?")
    text = _NO_SPACE_AFTER.sub(r"\1", text)
    return text.replace("`` ", '"').replace(" ''", '"')


def strip_control(text: str) -> str:
    """Drop control/format characters (they break tokenizers and terminals), keep everything else."""
    return "".join(ch for ch in text if unicodedata.category(ch) not in _CONTROL or ch in "\t\n")
