"""The one exception type that user input can raise.

Every check on user input raises :class:`InputError` naming the offending field and the rule it
breaks, so that the command line can print a single line and exit non-zero.
"""

import re

WORD_WIDTH = 80
"""Characters of one word (a run without spaces, such as a value the user typed) that a message keeps."""
FIELD_WIDTH = 100
MESSAGE_WIDTH = 384
"""Characters of a field, and of "field: rule", beyond which their middle is left out (the start and
the advice at the end are kept): with "hetlb: error: " the line stays within 400 characters."""
RULE_WIDTH = MESSAGE_WIDTH


def one_line(text, width: int = RULE_WIDTH) -> str:
    """``text`` on one line of reasonable length: every word longer than WORD_WIDTH cut, saying how
    long it was, then the middle of a text longer than ``width`` left out."""
    text = re.sub(rf"\S{{{WORD_WIDTH + 1},}}", _shortened_word, " ".join(str(text).splitlines()))
    if len(text) <= width:
        return text
    head = 2 * width // 3
    return f"{text[:head]} ... {text[len(text) - (width - head - 5) :]}"


def _shortened_word(match) -> str:
    """A long word cut to WORD_WIDTH characters with its length, its closing punctuation kept."""
    word = match[0]
    core = word.rstrip(";,.:)]'\"")
    return f"{core[: WORD_WIDTH - 3]}... ({len(core):,} characters){word[len(core) :]}"


class InputError(ValueError):
    """Invalid input: ``field`` names what is wrong and ``rule`` what it must satisfy, each kept to
    one line of reasonable length (:func:`one_line`), whatever the input they repeat.

    Parameters
    ----------
    field
        The input that is wrong: a key, a flag or a parameter, as the user wrote it.
    rule
        What it must satisfy.
    """

    def __init__(self, field: str, rule: str):
        self.field = one_line(field, FIELD_WIDTH)
        self.rule = one_line(rule, MESSAGE_WIDTH - 2 - len(self.field))
        super().__init__(f"{self.field}: {self.rule}")

    def __reduce__(self):
        # rebuilt from (field, rule) when it crosses a process boundary (a sweep's workers)
        return type(self), (self.field, self.rule)


class UnexpectedKeyword(InputError, TypeError):
    """A keyword argument that the function does not take (nor the chosen policy): a TypeError, as
    Python raises for an unexpected keyword, and an InputError, so the command line prints one line."""
