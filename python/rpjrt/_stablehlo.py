"""StableHLO text for a plugin whose parser is older than the text's printer.

A plugin parses StableHLO text with the StableHLO version it was built with, and text from a
newer printer may use syntax that version does not read (an i1 constant in hex with one byte
per element, for one, which the 0.81 CPU plugin's StableHLO 1.13.3 refuses). A portable
artifact serialized for the plugin's version does not have that problem: it is what JAX hands
plugins. When a plugin refuses a program's text, ``Client.compile`` calls
:func:`to_portable` and compiles the artifact instead; without jaxlib the plugin's error is
raised, naming the plugin's StableHLO version and how to produce the artifact.
"""

from __future__ import annotations


def to_portable(text: str, target: str) -> bytes | None:
    """``text`` serialized as a StableHLO portable artifact for version ``target``, using
    jaxlib's StableHLO bindings; ``None`` when jaxlib is not installed or cannot serialize
    the text (it is older than the text, or the text is not StableHLO)."""
    try:
        from jaxlib.mlir.dialects import stablehlo
    except Exception:
        return None
    try:
        artifact = stablehlo.serialize_portable_artifact_str(text, target)
    except Exception:
        return None
    return bytes(artifact) if artifact else None
