"""Sequence labelling: ``from delft.sequenceLabelling import Sequence`` (GROBID's first call)."""
from delft.sequenceLabelling.wrapper import Sequence

__all__ = ["Sequence"]
