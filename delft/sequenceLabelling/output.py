"""Writing tagged sequences: (token, label) pairs, DeLFT's JSON with character offsets, IOB, TEI."""
import datetime
from xml.sax.saxutils import escape

import numpy as np

from delft.sequenceLabelling.tagger import get_entities_with_offsets


def entities_json(text, tokens, offsets, labels, scores):
    """DeLFT's per-text JSON: ``{"text", "entities": [{text, class, score, beginOffset, endOffset}]}``.

    As DeLFT's: ``endOffset`` is the offset of the entity's *last* character (included) and
    ``text`` is ``text[beginOffset:endOffset + 1]``, the original characters between. Unlike
    DeLFT's, ``score`` is the mean confidence of the entity's words (DeLFT writes 1.0 for CRF
    models), and pre-tokenised input has entities too, with offsets into its tokens joined by
    single spaces (DeLFT gives none).

    >>> entities_json("in June 2005", ["in", "June", "2005"], [(0, 2), (3, 7), (8, 12)],
    ...               ["O", "B-<month>", "B-<year>"], [0.9, 0.8, 0.6])["entities"][0]
    {'text': 'June', 'class': '<month>', 'score': 0.8, 'beginOffset': 3, 'endOffset': 6}
    """
    if text is None:
        text = " ".join(tokens)
    entities = []
    for label_type, first, end, begin, last in get_entities_with_offsets(list(labels), offsets):
        entities.append({
            "text": text[begin:last + 1],
            "class": label_type,
            "score": round(float(np.mean(scores[first:end])), 4),
            "beginOffset": int(begin),
            "endOffset": int(last),
        })
    return {"text": text, "entities": entities}


def token_offsets(tokens):
    """Offsets of tokens joined by single spaces (for input given as tokens, not raw text)."""
    offsets, position = [], 0
    for token in tokens:
        offsets.append((position, position + len(token)))
        position += len(token) + 1
    return offsets


def json_header(model_name):
    return {"software": "DeLFT", "date": datetime.datetime.now().isoformat(),
            "model": model_name}


def iob_lines(tokens, labels):
    """One ``token<TAB>label`` line per token and a blank line after the sequence."""
    return "".join(f"{t}\t{l}\n" for t, l in zip(tokens, labels)) + "\n"


def tei_paragraph(text, tokens, offsets, labels):
    """A ``<p>`` with each entity wrapped in ``<rs type="...">``, the text between kept as it is."""
    if text is None:
        text = " ".join(tokens)
        offsets = token_offsets(tokens)
    parts, position = [], 0
    for label_type, _, _, begin, last in get_entities_with_offsets(list(labels), offsets):
        parts.append(escape(text[position:begin]))
        parts.append(f'<rs type="{escape(label_type, {chr(34): "&quot;"})}">'
                     f"{escape(text[begin:last + 1])}</rs>")
        position = last + 1
    parts.append(escape(text[position:]))
    return "<p>" + "".join(parts) + "</p>\n"


TEI_HEADER = '<?xml version="1.0" encoding="UTF-8"?>\n<TEI xmlns="http://www.tei-c.org/ns/1.0">\n<text>\n<body>\n'
TEI_FOOTER = "</body>\n</text>\n</TEI>\n"
