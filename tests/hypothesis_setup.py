"""Hypothesis, made a function of the test alone.

Hypothesis (6.131 and later) draws about 5 % of its values from the constants in the
source of every local module loaded at that moment. So which test files a run had
imported before a test changed what that test generated, even with
``derandomize=True``: a coverage check ("the generator reaches every logical type",
tests/test_avro_pairs.py) passed alone and failed in the whole suite. The suite keeps
Hypothesis's own constants (its global pool) and leaves out the loaded modules', so a
derandomized test draws the same examples alone, in its file or in the suite.
"""

from __future__ import annotations


def keep_draws_independent_of_loaded_modules() -> None:
    """Replace Hypothesis's collection of local constants by its empty start (a private
    hook: on a Hypothesis without it, nothing to do)."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:                                       # pragma: no cover
        return
    empty = getattr(providers, "_local_constants", None)
    if empty is not None and hasattr(providers, "_get_local_constants"):
        providers._get_local_constants = lambda: empty
