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

import importlib
import os


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


def legalize_chlo(text: str, target: str) -> bytes | None:
    """``text``, which holds CHLO ops, as a portable artifact for version ``target`` with
    the CHLO ops legalized to StableHLO by jaxlib's own code, as JAX does before a plugin
    sees a program (the plugin's own, possibly older, decomposition can give other values:
    digamma(0) is -inf in the 0.115 CPU plugin's, NaN in JAX's). ``None``, the text then
    compiled as it is, when ``RPJRT_LEGALIZE_CHLO`` is ``0`` (or ``false``, ``no``,
    ``off``), when jaxlib is not installed, or when it cannot serialize the text."""
    if os.environ.get("RPJRT_LEGALIZE_CHLO", "").strip().lower() in ("0", "false", "no", "off"):
        return None
    serialize = None
    # jaxlib 0.6 and newer, then older jaxlib: the binding behind jax.export's bytes.
    for name in ("jaxlib._jax", "jaxlib.xla_extension"):
        try:
            serialize = importlib.import_module(name).mlir.serialize_portable_artifact
            break
        except Exception:
            continue
    if serialize is None:
        return None
    try:
        artifact = serialize(text, target)
    except Exception:
        return None
    return bytes(artifact) if artifact else None
