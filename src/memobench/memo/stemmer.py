"""Port of the ``stemmer`` npm package v2.0.1 (Titus Wormer; Porter 1980).

docs/harnesses.md#the-stemmer.  exp5 / exp5-m stem window tokens with
this exact function; off-the-shelf stemmers (NLTK's three Porter modes,
Snowball) give different stems, so the package is mirrored regex for regex.

Faithfulness notes (JavaScript vs. Python ``re``):

* JS ``$`` without the ``m`` flag matches only at the very end of the input;
  Python's ``$`` also matches before a trailing ``\\n``.  We use ``\\Z``.
* JS ``.`` does not match the line terminators ``\\n``, ``\\r``, U+2028 and
  U+2029; Python's ``.`` excludes only ``\\n``.  We spell ``.`` as the class
  ``[^\\n\\r\\u2028\\u2029]``.
* JS strings and (non-``u``) regexes work on UTF-16 code units.  A word with
  characters beyond the BMP is therefore processed as a string of code units
  (surrogates) and converted back at the end, so lengths, ``slice(0, -1)``
  and the character classes behave exactly as in JS.
* Lazy ``+?`` prefixes give the "shortest non-empty prefix" / "earliest start
  after a non-empty prefix" semantics of docs/harnesses.md#the-stemmer; backtracking order of the
  two engines is the same for these patterns.
"""

from __future__ import annotations

import re
from array import array
from functools import lru_cache

__all__ = ["stem"]

# Standard suffix manipulations.
_STEP2_LIST = {
    "ational": "ate",
    "tional": "tion",
    "enci": "ence",
    "anci": "ance",
    "izer": "ize",
    "bli": "ble",
    "alli": "al",
    "entli": "ent",
    "eli": "e",
    "ousli": "ous",
    "ization": "ize",
    "ation": "ate",
    "ator": "ate",
    "alism": "al",
    "iveness": "ive",
    "fulness": "ful",
    "ousness": "ous",
    "aliti": "al",
    "iviti": "ive",
    "biliti": "ble",
    "logi": "log",
}

_STEP3_LIST = {
    "icate": "ic",
    "ative": "",
    "alize": "al",
    "iciti": "ic",
    "ical": "ic",
    "ful": "",
    "ness": "",
}

# JS `.` (no `s` flag): anything but a line terminator.
_DOT = "[^\\n\\r\\u2028\\u2029]"
# JS `$` (no `m` flag): end of input only.
_END = r"\Z"

# Consonant-vowel sequences.
_CONSONANT = "[^aeiou]"
_VOWEL = "[aeiouy]"
_CONSONANTS = "(" + _CONSONANT + "[^aeiouy]*)"
_VOWELS = "(" + _VOWEL + "[aeiou]*)"

_GT0 = re.compile("^" + _CONSONANTS + "?" + _VOWELS + _CONSONANTS)  # m>0
_EQ1 = re.compile(  # m=1
    "^" + _CONSONANTS + "?" + _VOWELS + _CONSONANTS + _VOWELS + "?" + _END
)
_GT1 = re.compile(  # m>1
    "^" + _CONSONANTS + "?(" + _VOWELS + _CONSONANTS + "){2,}"
)
_VOWEL_IN_STEM = re.compile("^" + _CONSONANTS + "?" + _VOWEL)
_CONSONANT_LIKE = re.compile(  # cvc
    "^" + _CONSONANTS + _VOWEL + "[^aeiouwxy]" + _END
)

# Exception expressions.
_SFX_LL = re.compile("ll" + _END)
_SFX_E = re.compile("^(" + _DOT + "+?)e" + _END)
_SFX_Y = re.compile("^(" + _DOT + "+?)y" + _END)
_SFX_ION = re.compile("^(" + _DOT + "+?(s|t))(ion)" + _END)
_SFX_ED_OR_ING = re.compile("^(" + _DOT + "+?)(ed|ing)" + _END)
_SFX_AT_OR_BL_OR_IZ = re.compile("(at|bl|iz)" + _END)
_SFX_EED = re.compile("^(" + _DOT + "+?)eed" + _END)
_SFX_S = re.compile("^" + _DOT + "+?[^s]s" + _END)
_SFX_SSES_OR_IES = re.compile("^" + _DOT + "+?(ss|i)es" + _END)
_SFX_MULTI_CONSONANT_LIKE = re.compile(r"([^aeiouylsz])\1" + _END)
_STEP2 = re.compile(
    "^(" + _DOT + "+?)(ational|tional|enci|anci|izer|bli|alli|entli|eli|ousli"
    "|ization|ation|ator|alism|iveness|fulness|ousness|aliti|iviti|biliti"
    "|logi)" + _END
)
_STEP3 = re.compile(
    "^(" + _DOT + "+?)(icate|ative|alize|iciti|ical|ful|ness)" + _END
)
_STEP4 = re.compile(
    "^(" + _DOT + "+?)(al|ance|ence|er|ic|able|ible|ant|ement|ment|ent|ou"
    "|ism|ate|iti|ous|ive|ize)" + _END
)


def _to_code_units(s: str) -> str:
    """Return ``s`` as a str of UTF-16 code units (astral chars -> surrogates)."""
    units = array("H")
    units.frombytes(s.encode("utf-16-le", "surrogatepass"))
    return "".join(map(chr, units))


def _from_code_units(s: str) -> str:
    """Inverse of :func:`_to_code_units`; lone surrogates are kept as such."""
    return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _stem_units(result: str) -> str:
    """The package's ``stemmer`` body after ``toLowerCase`` and the length test.

    ``result`` is a string of UTF-16 code units of length >= 3.
    """
    first_was_y = False
    # Detect initial `y`, make sure it never matches.
    if result[0] == "y":
        first_was_y = True
        result = "Y" + result[1:]

    # Step 1a.
    if _SFX_SSES_OR_IES.search(result):
        result = result[:-2]
    elif _SFX_S.search(result):
        result = result[:-1]

    # Step 1b.
    match = _SFX_EED.search(result)
    if match:
        if _GT0.search(match.group(1)):
            result = result[:-1]
    else:
        match = _SFX_ED_OR_ING.search(result)
        if match and _VOWEL_IN_STEM.search(match.group(1)):
            result = match.group(1)
            if _SFX_AT_OR_BL_OR_IZ.search(result):
                result += "e"
            elif _SFX_MULTI_CONSONANT_LIKE.search(result):
                result = result[:-1]
            elif _CONSONANT_LIKE.search(result):
                result += "e"

    # Step 1c.
    match = _SFX_Y.search(result)
    if match and _VOWEL_IN_STEM.search(match.group(1)):
        result = match.group(1) + "i"

    # Step 2.
    match = _STEP2.search(result)
    if match and _GT0.search(match.group(1)):
        result = match.group(1) + _STEP2_LIST[match.group(2)]

    # Step 3.
    match = _STEP3.search(result)
    if match and _GT0.search(match.group(1)):
        result = match.group(1) + _STEP3_LIST[match.group(2)]

    # Step 4.
    match = _STEP4.search(result)
    if match:
        if _GT1.search(match.group(1)):
            result = match.group(1)
    else:
        match = _SFX_ION.search(result)
        if match and _GT1.search(match.group(1)):
            result = match.group(1)

    # Step 5.
    match = _SFX_E.search(result)
    if match and (
        _GT1.search(match.group(1))
        or (_EQ1.search(match.group(1)) and not _CONSONANT_LIKE.search(match.group(1)))
    ):
        result = match.group(1)

    if _SFX_LL.search(result) and _GT1.search(result):
        result = result[:-1]

    # Turn initial `Y` back to `y`.
    if first_was_y:
        result = "y" + result[1:]

    return result


@lru_cache(maxsize=1 << 17)
def stem(word: str) -> str:
    """Stem ``word`` exactly like ``stemmer@2.0.1`` (``stemmer(word)`` in JS)."""
    result = str(word).lower()
    # Exit early (JS `result.length < 3`, i.e. UTF-16 length).
    if len(result.encode("utf-16-le", "surrogatepass")) // 2 < 3:
        return result
    if any(ord(ch) > 0xFFFF for ch in result):
        return _from_code_units(_stem_units(_to_code_units(result)))
    return _stem_units(result)
