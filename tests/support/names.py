"""The name rule: one example of each kind of character it refuses, and where it stands,
shared by the broker's tests and the served listeners' tests. Each entry is keyed by its kind
and holds the name and the character the refusal's sentence names (`U+XXXX`)."""

from __future__ import annotations

# Every format character (Cf): zero-width ones, the byte order mark, the joiners (even inside a
# visible name: "a\u200cb" shows as "ab"), the soft hyphen, the bidirectional controls.
FORMAT_CHARACTERS = {
    "zero-width space": ("launch\u200b", "U+200B"),
    "byte order mark": ("\ufefflaunch", "U+FEFF"),
    "zero-width non-joiner": ("نامه\u200cها", "U+200C"),
    "zero-width joiner": ("👩\u200d💻 team", "U+200D"),
    "word joiner": ("la\u2060unch", "U+2060"),
    "soft hyphen": ("laun\u00adch", "U+00AD"),
    "right-to-left override": ("report\u202egpj.exe", "U+202E"),
    "left-to-right isolate": ("\u2066x\u2069", "U+2066"),
}
# A space of any kind at either end: whitespace of every sort, and the fillers that show as one.
EDGE_SPACES = {
    "space at the end": ("launch ", "U+0020"),
    "space at the start": (" launch", "U+0020"),
    "no-break space": ("launch\u00a0", "U+00A0"),
    "ideographic space": ("\u3000launch", "U+3000"),
    "em space": ("launch\u2003", "U+2003"),
    "tab": ("launch\t", "U+0009"),
    "Hangul filler": ("launch\u3164", "U+3164"),
    "halfwidth Hangul filler": ("\uffa0launch", "U+FFA0"),
    "Braille blank": ("launch\u2800", "U+2800"),
    "Hangul choseong filler": ("\u115flaunch", "U+115F"),
    "Hangul jungseong filler": ("launch\u1160", "U+1160"),
}
# A combining mark to start the name: nonspacing (Mn), spacing (Mc) and enclosing (Me).
LEADING_MARKS = {
    "combining acute accent": ("\u0301launch", "U+0301"),
    "Devanagari vowel sign": ("\u093elaunch", "U+093E"),
    "enclosing circle": ("\u20ddlaunch", "U+20DD"),
    "combining grapheme joiner": ("\u034flaunch", "U+034F"),
}
REFUSED_NAMES = {**FORMAT_CHARACTERS, **EDGE_SPACES, **LEADING_MARKS}
