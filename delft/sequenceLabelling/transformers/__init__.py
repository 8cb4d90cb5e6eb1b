"""The transformer family's stages before the model: a local Hugging Face checkpoint and its
tokenizer (:mod:`.checkpoint`), the keras-hub encoder built from it (:mod:`.encoder`), and words to
subtokens (:mod:`.preprocess`). The model itself is ``delft.sequenceLabelling.models.transformer``.
"""
