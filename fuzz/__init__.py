"""Coverage-guided fuzzing of everything that parses bytes from outside (see docs/fuzzing.md)."""
