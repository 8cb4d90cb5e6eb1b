"""Text classification (DeLFT's second half): ``Classifier``, its architectures and GROBID's
classifiers."""
