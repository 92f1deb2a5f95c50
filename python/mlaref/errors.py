"""The exceptions of mlaref. Each carries the C library's one-line message, the line the command
prints after ``mlaref CMD:``.

``InputError`` (a ``ValueError``) is what the command reports with exit status 2: inputs that
break the contract, a kernel output of the wrong shape or dtype, a bad shape spec, rule or recipe.
"""


class Error(Exception):
    """The base of every mlaref exception."""


class InputError(Error, ValueError):
    """Bad input: the command would exit with status 2 and print this line."""


class RecipeError(InputError):
    """A recipe that is neither a built-in, a readable file nor valid text, or a bad key=value."""


class LibraryError(Error, ImportError):
    """libmlaref.so is missing, or is not of this package's version."""


class ComputeError(Error, RuntimeError):
    """The library failed on valid input (out of memory, a size that overflows)."""
