"""The message codec generator: Kafka's JSON schemas in, ``protocol/messages`` out.

Run ``python -m protocol.codegen`` after changing a schema or the emitters; the
output is committed and a test checks that regenerating changes nothing.
"""

from protocol.codegen.generate import generate, render_all

__all__ = ["generate", "render_all"]
