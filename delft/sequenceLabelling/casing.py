"""DeLFT's casing classes of a token: the casing input of BidLSTM_CNN and BidLSTM_CRF_CASING."""

# DeLFT's casing classes, in its id order (0 pads)
CASING_CLASSES = ("<PAD>", "numeric", "allLower", "allUpper", "initialUpper", "other",
                  "mainly_numeric", "contains_digit")
CASING_INDEX = {name: i for i, name in enumerate(CASING_CLASSES)}


def casing_class(token: str) -> str:
    """DeLFT's casing class of a token (the casing input of BidLSTM_CNN, BidLSTM_CRF_CASING).

    >>> [casing_class(t) for t in ["2005", "12a", "june", "IEEE", "June", "-1-", "-"]]
    ['numeric', 'mainly_numeric', 'allLower', 'allUpper', 'initialUpper', 'contains_digit', 'other']
    """
    digits = sum(c.isdigit() for c in token)
    if token.isdigit():
        return "numeric"
    if token and digits / len(token) > 0.5:
        return "mainly_numeric"
    if token.islower():
        return "allLower"
    if token.isupper():
        return "allUpper"
    if token[:1].isupper():
        return "initialUpper"
    return "contains_digit" if digits else "other"
