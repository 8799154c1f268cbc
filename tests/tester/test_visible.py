"""Text from other parties, written where it cannot act (`tester.suites.visible`): control
characters, bidirectional controls and what XML forbids as escapes; the rest as it is (pure)."""

from __future__ import annotations

import json
import unicodedata

import pytest

from tester.suites.visible import visible, visible_json

# A reply that, printed raw, erases the line before it, returns over it and prints a green PASS.
SPOOF = "\x1b[2K\r\x1b[32mPASS  smoke · greets\x1b[0m"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (SPOOF, "\\x1b[2K\\x0d\\x1b[32mPASS  smoke · greets\\x1b[0m"),
        ("bell\x07 back\x08 nul\x00 del\x7f", "bell\\x07 back\\x08 nul\\x00 del\\x7f"),
        # C1: CSI as one character, and the next line.
        ("\x9b31m\x85", "\\x9b31m\\x85"),
        # Bidirectional controls reorder what follows them on the line.
        (
            "pass\u202eliaf\u202c \u2066x\u2069 \u200f\u061c",
            "pass\\u202eliaf\\u202c \\u2066x\\u2069 \\u200f\\u061c",
        ),
        # A lone surrogate cannot even be encoded; XML 1.0 forbids U+FFFE and U+FFFF.
        ("\ud800 \ufffe \uffff", "\\ud800 \\ufffe \\uffff"),
        # Line feeds and tabs lay reports out; a backslash, letters, emoji and joiners stay.
        ("one\n\ttwo \\x1b é 中 👩\u200d💻", "one\n\ttwo \\x1b é 中 👩\u200d💻"),
    ],
    ids=["spoof", "c0", "c1", "bidi", "xml-forbidden", "kept"],
)
def test_visible_escapes_what_acts_and_keeps_the_rest(text: str, shown: str) -> None:
    assert visible(text) == shown


def test_visible_leaves_no_control_or_bidirectional_control_of_any_text() -> None:
    """Every code point of the first plane: none left that is a control (but the line feed and
    the tab), a bidirectional control or a surrogate."""
    every = "".join(chr(code) for code in range(0x10000))
    left = {
        char
        for char in visible(every)
        if (unicodedata.category(char) in ("Cc", "Cs") and char not in "\n\t")
        or unicodedata.bidirectional(char)
        in ("LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI")
        or char in "\u200e\u200f\u061c\ufffe\uffff"
    }
    assert left == set()


def test_visible_json_is_the_exact_text_and_safe_to_print() -> None:
    value = {"actual": SPOOF + "\x9b\u202e\ud800\n", "n": 1}
    line = visible_json(value)
    assert json.loads(line) == value
    assert visible(line) == line
    assert "\n" not in line
