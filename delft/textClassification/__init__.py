"""Text classification (DeLFT's second half): ``Classifier``, its architectures and GROBID's
classifiers."""
from delft.textClassification.wrapper import Classifier

__all__ = ["Classifier"]
