"""The one exception type that user input can raise.

Every check on user input raises :class:`InputError` naming the offending field and the rule it
breaks, so that the command line can print a single line and exit non-zero.
"""


class InputError(ValueError):
    """Invalid input: ``field`` names what is wrong and ``rule`` what it must satisfy."""

    def __init__(self, field: str, rule: str):
        self.field = field
        self.rule = rule
        super().__init__(f"{field}: {rule}")

    def __reduce__(self):
        # rebuilt from (field, rule) when it crosses a process boundary (a sweep's workers)
        return type(self), (self.field, self.rule)


class UnexpectedKeyword(InputError, TypeError):
    """A keyword argument that the function does not take (nor the chosen policy): a TypeError, as
    Python raises for an unexpected keyword, and an InputError, so the command line prints one line."""
