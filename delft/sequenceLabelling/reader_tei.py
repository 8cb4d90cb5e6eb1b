"""Reader of TEI XML with ``<rs type="...">`` annotations (DeLFT's insult data). Import it from
``delft.sequenceLabelling.reader``, DeLFT's module."""
import xml.etree.ElementTree as ElementTree

from delft.sequenceLabelling.reader_common import IOB_BEGIN, IOB_INSIDE, IOB_OUTSIDE, object_array
from delft.utilities.errors import DataFormatError
from delft.utilities.Tokenizer import tokenizeAndFilterSimple


def _local_name(tag):
    """``p`` for ``{http://www.tei-c.org/ns/1.0}p``: TEI files may or may not use the namespace."""
    return tag.rsplit("}", 1)[-1]


def _tei_segments(element, label, segments):
    """Append ``(text, label)`` for the content of ``element`` in document order.

    Text inside ``<rs type="T">`` gets label ``<T>`` (nested markup takes the outer ``rs``), ``<lb/>`` is a
    space, any other markup is transparent. Each ``rs`` is its own segment so that two adjacent entities
    of one type stay two entities.
    """
    if element.text:
        segments.append((element.text, label))
    for child in element:
        name = _local_name(child.tag)
        if name == "lb":
            segments.append((" ", label))
        elif name == "rs" and label is None:
            entity, entity_segments = f"<{child.get('type')}>", []
            _tei_segments(child, entity, entity_segments)
            segments.append(("".join(text for text, _ in entity_segments), entity))
        else:
            _tei_segments(child, label, segments)
        if child.tail:
            segments.append((child.tail, label))


def _tei_paragraph(paragraph, source, index):
    """Tokens and IOB2 labels of one ``<p>``; the text of each segment is tokenised on its own, so an
    entity boundary is always a token boundary (as in DeLFT)."""
    for rs in paragraph.iter():
        if _local_name(rs.tag) == "rs" and rs.get("type") is None:
            raise DataFormatError(source, None, f"<rs> without a type attribute in paragraph {index}")
    segments = []
    _tei_segments(paragraph, None, segments)
    tokens, labels = [], []
    for text, label in segments:
        segment_tokens = tokenizeAndFilterSimple(text)
        tokens.extend(segment_tokens)
        if label is None:
            labels.extend([IOB_OUTSIDE] * len(segment_tokens))
        elif segment_tokens:
            labels.append(IOB_BEGIN + label)
            labels.extend([IOB_INSIDE + label] * (len(segment_tokens) - 1))
    return tokens, labels


def _tei_sequences(root, source):
    x, y = [], []
    paragraphs = [element for element in root.iter() if _local_name(element.tag) == "p"]
    for index, paragraph in enumerate(paragraphs, start=1):
        tokens, labels = _tei_paragraph(paragraph, source, index)
        # An empty paragraph would be a zero-length sequence, which no model can use.
        if tokens:
            x.append(tokens)
            y.append(labels)
    if not x:
        raise DataFormatError(source, None, "empty: no <p> with text found")
    return object_array(x), object_array(y)


def _parse_xml(parse, argument, source):
    try:
        return parse(argument)
    except ElementTree.ParseError as error:
        raise DataFormatError(source, error.position[0], f"malformed XML ({error})") from None


def load_data_and_labels_xml_file(filepath):
    """Tokens and IOB2 labels ``(x, y)`` of a TEI file: each ``<p>`` is a sequence, ``<rs type="T">``
    marks an entity labelled ``B-<T>``/``I-<T>`` (DeLFT's form), other text is ``O``.

    >>> x, y = load_data_and_labels_xml_string('<TEI><p>You <rs type="insult">big oaf</rs>!</p></TEI>')
    >>> x[0], y[0]
    (['You', 'big', 'oaf', '!'], ['O', 'B-<insult>', 'I-<insult>', 'O'])
    """
    source = str(filepath)
    return _tei_sequences(_parse_xml(ElementTree.parse, filepath, source).getroot(), source)


def load_data_and_labels_xml_string(xml_string, source="<string>"):
    """``(x, y)`` of a TEI document held in a string; see :func:`load_data_and_labels_xml_file`."""
    return _tei_sequences(_parse_xml(ElementTree.fromstring, xml_string, source), source)
