"""Writing tagged sequences: (token, label) pairs, DeLFT's JSON with character offsets, IOB, TEI."""
import datetime
import json
from xml.sax.saxutils import escape

import numpy as np

from delft.sequenceLabelling.evaluation import get_entities


def entities_json(text, tokens, offsets, labels, scores):
    """DeLFT's per-text JSON: ``{"text", "entities": [{text, class, score, beginOffset, endOffset}]}``."""
    entities = []
    for label_type, first, last in get_entities(list(labels)):
        begin, end = offsets[first][0], offsets[last][1]
        entities.append({
            "text": text[begin:end] if text is not None else " ".join(tokens[first:last + 1]),
            "class": label_type,
            "score": round(float(np.mean(scores[first:last + 1])), 4),
            "beginOffset": int(begin),
            "endOffset": int(end),
        })
    return {"text": text if text is not None else " ".join(tokens), "entities": entities}


def token_offsets(tokens):
    """Offsets of tokens joined by single spaces (for input given as tokens, not raw text)."""
    offsets, position = [], 0
    for token in tokens:
        offsets.append((position, position + len(token)))
        position += len(token) + 1
    return offsets


def json_header(model_name):
    return {"software": "delft", "date": datetime.datetime.now().isoformat(),
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
    for label_type, first, last in get_entities(list(labels)):
        begin, end = offsets[first][0], offsets[last][1]
        parts.append(escape(text[position:begin]))
        parts.append(f'<rs type="{escape(label_type, {chr(34): "&quot;"})}">'
                     f"{escape(text[begin:end])}</rs>")
        position = end
    parts.append(escape(text[position:]))
    return "<p>" + "".join(parts) + "</p>\n"


TEI_HEADER = '<?xml version="1.0" encoding="UTF-8"?>\n<TEI xmlns="http://www.tei-c.org/ns/1.0">\n<text>\n<body>\n'
TEI_FOOTER = "</body>\n</text>\n</TEI>\n"


class StreamedDocument:
    """One output document of ``Sequence.tag_file`` written chunk by chunk to ``stream``.

    ``output_format``: ``"json"`` (DeLFT's document, its ``texts`` list streamed), ``"TEI"`` or
    ``"iob"`` (also None). Each chunk is what ``Sequence.tag`` returns for :attr:`tag_format`.
    """

    FORMATS = {"json": "json", "TEI": "TEI", "tei": "TEI", "iob": None, None: None}

    def __init__(self, stream, output_format, model_name):
        if output_format not in self.FORMATS:
            raise ValueError(f"output_format must be json, TEI or iob, not {output_format!r}")
        self.stream = stream
        self.tag_format = self.FORMATS[output_format]
        self.first = True
        if self.tag_format == "json":
            stream.write(json.dumps(json_header(model_name))[:-1] + ', "texts": [\n')
        elif self.tag_format == "TEI":
            stream.write(TEI_HEADER)

    def add(self, tagged):
        """Write one chunk of tagged texts."""
        if self.tag_format == "json":
            for item in tagged["texts"]:
                self.stream.write(("" if self.first else ",\n") +
                                  json.dumps(item, ensure_ascii=False))
                self.first = False
        elif self.tag_format == "TEI":
            self.stream.write(tagged[len(TEI_HEADER):-len(TEI_FOOTER)])
        else:
            for pairs in tagged:
                self.stream.write(iob_lines([t for t, _ in pairs], [label for _, label in pairs]))

    def end(self, runtime):
        """Close the document (``runtime``: seconds, in the JSON document)."""
        if self.tag_format == "json":
            self.stream.write(f'\n], "runtime": {runtime}}}\n')
        elif self.tag_format == "TEI":
            self.stream.write(TEI_FOOTER)
