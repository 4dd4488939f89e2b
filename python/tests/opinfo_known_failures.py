"""OpInfo samples that fail through luminal, with why: (op, dtype, sample index) -> reason."""
KNOWN_FAILURES: dict[tuple[str, str, int], str] = {}
