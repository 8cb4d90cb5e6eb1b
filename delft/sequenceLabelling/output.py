"""Writing tagged sequences: DeLFT's JSON with character offsets, TEI and IOB, one writer per
format (:data:`WRITERS`), whole or streamed."""
import datetime
import json
from dataclasses import dataclass
from functools import cached_property
from itertools import chain
from typing import List, Optional
from xml.sax.saxutils import escape

import numpy as np


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


def per_text(values, starts: List[int]) -> list:
    """``values`` of all the texts' tokens, text after text, cut into one part per text (text
    ``i``'s are ``values[starts[i]:starts[i + 1]]``).

    >>> per_text(["B-<day>", "B-<month>", "B-<year>"], [0, 1, 1, 3])
    [['B-<day>'], [], ['B-<month>', 'B-<year>']]
    """
    return [values[s:e] for s, e in zip(starts[:-1], starts[1:])]


def token_label_pairs(tagged: "Tagged") -> List[List[List[str]]]:
    """Per text, ``[token, label]`` pairs: what ``Sequence.tag`` returns without an output format.
    Paired over all the tokens at once, then cut per text (cheaper than text by text).

    >>> tagged = Tagged([None, None], [["June", "2005"], ["12"]], None,
    ...                 ["B-<month>", "B-<year>", "B-<day>"], np.ones(3), [0, 2, 3])
    >>> token_label_pairs(tagged)
    [[['June', 'B-<month>'], ['2005', 'B-<year>']], [['12', 'B-<day>']]]
    """
    pairs = list(map(list, zip(chain.from_iterable(tagged.tokens), tagged.all_labels)))
    return per_text(pairs, tagged.starts)


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


def tei_type(label_type):
    """An entity type as TEI writes it, GROBID's ``<date>`` as ``date`` (GROBID's TEI, the
    insult data).

    >>> tei_type("<date>"), tei_type("insult")
    ('date', 'insult')
    """
    return label_type[1:-1] if label_type.startswith("<") and label_type.endswith(">") \
        else label_type


def tei_paragraph(text, tokens, offsets, labels):
    """A ``<p>`` with each entity wrapped in ``<rs type="...">``, the text between kept as it is.

    >>> tei_paragraph(None, ["in", "June"], None, ["O", "B-<month>"])
    '<p>in <rs type="month">June</rs></p>\\n'
    """
    if text is None:
        text = " ".join(tokens)
        offsets = token_offsets(tokens)
    parts, position = [], 0
    for label_type, _, _, begin, last in get_entities_with_offsets(list(labels), offsets):
        parts.append(escape(text[position:begin]))
        parts.append(f'<rs type="{escape(tei_type(label_type), {chr(34): "&quot;"})}">'
                     f"{escape(text[begin:last + 1])}</rs>")
        position = last + 1
    parts.append(escape(text[position:]))
    return "<p>" + "".join(parts) + "</p>\n"


TEI_HEADER = '<?xml version="1.0" encoding="UTF-8"?>\n<TEI xmlns="http://www.tei-c.org/ns/1.0">\n<text>\n<body>\n'
TEI_FOOTER = "</body>\n</text>\n</TEI>\n"


@dataclass
class Tagged:
    """Tagged texts, what every output format is written from: per text, the original string
    (None for pre-tokenised input), its tokens and their character offsets (None when not
    needed); the labels and confidences of all the tokens, text after text (text ``i``'s are
    ``[starts[i], starts[i + 1])``), cut per text (:attr:`labels`, :attr:`scores`) only for the
    formats that read them so."""

    texts: List[Optional[str]]
    tokens: List[List[str]]
    offsets: Optional[List[list]]
    all_labels: List[str]
    all_scores: np.ndarray
    starts: List[int]

    @cached_property
    def labels(self) -> List[List[str]]:
        """Per text, its tokens' labels."""
        return per_text(self.all_labels, self.starts)

    @cached_property
    def scores(self) -> List[np.ndarray]:
        """Per text, its tokens' confidences."""
        return per_text(self.all_scores, self.starts)

    def with_offsets(self):
        """The same, with the offsets of pre-tokenised input (its tokens joined by spaces)."""
        if self.offsets is None:
            self.offsets = [token_offsets(tokens) for tokens in self.tokens]
        return self


class Writer:
    """One output document written to ``stream`` piece by piece: :meth:`begin`, :meth:`add`
    (a :class:`Tagged` chunk at a time), :meth:`end`. One subclass per format (:data:`WRITERS`),
    used by ``Sequence.tag``, ``Sequence.tag_file`` and every CLI."""

    def __init__(self, stream, model_name):
        self.stream = stream
        self.model_name = model_name

    def begin(self):
        """Write what comes before the texts."""

    def add(self, tagged):
        raise NotImplementedError

    def end(self, runtime):
        """Write what comes after the texts (``runtime``: seconds)."""


class JsonWriter(Writer):
    """DeLFT's JSON document, its ``texts`` list streamed one compact text a line."""

    def begin(self):
        self.first = True
        self.stream.write(json.dumps(json_header(self.model_name))[:-1] + ', "texts": [\n')

    def add(self, tagged):
        for item in self.items(tagged):
            self.stream.write(("" if self.first else ",\n") + json.dumps(item, ensure_ascii=False))
            self.first = False

    def end(self, runtime):
        self.stream.write(f'\n], "runtime": {runtime}}}\n')

    @staticmethod
    def items(tagged):
        tagged.with_offsets()
        return [entities_json(text, tokens, offsets, labels, scores) for text, tokens, offsets,
                labels, scores in zip(tagged.texts, tagged.tokens, tagged.offsets, tagged.labels,
                                      tagged.scores)]

    @classmethod
    def document(cls, model_name, tagged, runtime):
        """The whole document as a dict (what ``Sequence.tag(..., "json")`` returns)."""
        return dict(json_header(model_name), texts=cls.items(tagged), runtime=runtime)


class TeiWriter(Writer):
    """A TEI document, a ``<p>`` per text, entities as ``<rs type="...">``."""

    def begin(self):
        self.stream.write(TEI_HEADER)

    def add(self, tagged):
        tagged.with_offsets()
        for text, tokens, offsets, labels in zip(tagged.texts, tagged.tokens, tagged.offsets,
                                                 tagged.labels):
            self.stream.write(tei_paragraph(text, tokens, offsets, labels))

    def end(self, runtime):
        self.stream.write(TEI_FOOTER)


class IobWriter(Writer):
    """``token<TAB>label`` lines, a blank line after each text."""

    def add(self, tagged):
        for tokens, labels in zip(tagged.tokens, tagged.labels):
            self.stream.write(iob_lines(tokens, labels))


WRITERS = {"json": JsonWriter, "tei": TeiWriter, "iob": IobWriter}
FORMATS = tuple(WRITERS)


def output_format(name):
    """The format ``name`` (any case) as a key of :data:`WRITERS`; a one-line error naming the
    formats otherwise.

    >>> output_format("TEI")
    'tei'
    """
    key = str(name).lower()
    if key not in WRITERS:
        raise ValueError(f"output format must be one of {', '.join(FORMATS)} (any case), not "
                         f"{name!r}")
    return key


def get_entities_with_offsets(seq, offsets):
    """DeLFT's entities of a tagged sequence, with character offsets (DeLFT's ``tagger.py`` function).

    An entity starts at a ``B-`` label and goes on over the ``I-`` labels of its type; a stray
    ``I-`` (no ``B-`` before it) starts nothing, as in DeLFT. Labels past the offsets are not read.

    Args:
        seq: IOB2 labels of the tokens.
        offsets: ``(start, end)`` character offsets of the tokens (end exclusive).

    Returns:
        ``(type, first token, last token + 1, first character, last character)`` per entity: the
        character span is ``[first character, last character]``, both included, as DeLFT's.

    >>> get_entities_with_offsets(["B-PER", "I-PER", "O", "B-LOC"],
    ...                           [(0, 10), (11, 15), (16, 29), (30, 41)])
    [('PER', 0, 2, 0, 14), ('LOC', 3, 4, 30, 40)]
    >>> get_entities_with_offsets(["I-PER", "B-<ref-marker>", "I-<ref-marker>"],
    ...                           [(0, 1), (2, 3), (4, 5)])
    [('<ref-marker>', 1, 3, 2, 4)]
    """
    count = min(len(seq), len(offsets))
    chunks = []
    i = 0
    while i < count:
        if not seq[i].startswith("B"):
            i += 1
            continue
        kind = _label_type(seq[i])
        j = i + 1
        while j < count and seq[j].startswith("I") and _label_type(seq[j]) == kind:
            j += 1
        chunks.append((kind, i, j, offsets[i][0], offsets[j - 1][1] - 1))
        i = j
    return chunks


def _label_type(label):
    """``<date>`` of ``B-<date>``; what follows the prefix, so ``B-<ref-marker>`` keeps its
    hyphen (DeLFT's ``split("-")[-1]`` would make it ``marker>``)."""
    return label[2:] if label[1:2] == "-" else label
