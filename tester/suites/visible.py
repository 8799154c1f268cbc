"""Text from other parties, shown where it cannot act: control characters written as escapes.

A reply, a judge's reason or a listener's sentence is the text of another party. Printed as it
is, an escape sequence in it rewrites the reader's terminal (`\\x1b[2K` erases a line, `\\r`
returns over it, `\\x1b[32mPASS` prints a green verdict that is not the report's), a
bidirectional override reorders what follows it on the line, and in an XML report a control
character makes the file no XML at all. So every text the client prints or writes into a report
that is not HTML goes through `visible`: the C0 and C1 controls but the line feed and the tab,
the bidirectional controls, lone surrogates and the two characters XML 1.0 forbids beyond the
controls (U+FFFE, U+FFFF) are written as escapes, `\\x1b` below U+0100 and `\\u202e` above.
Line feeds and tabs stay: reports lay their lines out with them. A backslash stays as it is.
"""

from __future__ import annotations

import json
import re

# Unicode's Bidi_Control characters: the marks, embeddings, overrides and isolates that
# reorder the text around them.
BIDI_CONTROLS = r"\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
HIDDEN = re.compile(rf"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI_CONTROLS}\ud800-\udfff\ufffe\uffff]")


def escape(char: str) -> str:
    """`\\x1b` for a character below U+0100, `\\u202e` for one above."""
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with every character `HIDDEN` matches written as its escape."""
    return HIDDEN.sub(lambda found: escape(found.group()), text)


def visible_json(value: object) -> str:
    """`value` as one line of JSON holding the exact text, safe to print: the characters
    `HIDDEN` matches are written as JSON's own `\\u` escapes (JSON escapes the other controls
    itself), so the line parses back to the same value."""
    written = json.dumps(value, ensure_ascii=False)
    return HIDDEN.sub(lambda found: f"\\u{ord(found.group()):04x}", written)
