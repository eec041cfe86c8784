"""Live migration: the destination's domain XML without our pins.

Our pins are live-only (``VIR_DOMAIN_AFFECT_LIVE``), yet they appear in
``virsh dumpxml --migratable``, from which nova builds the destination
XML of a live migration (``nova.virt.libvirt.migration.
get_updated_guest_xml``). nova rewrites ``<cputune>`` only for guests
with an instance NUMA topology; for every other guest our pins would go
to the destination as they are, where the CPUs may not exist (libvirt
refuses: ``Unable to write to '.../emulator/cpuset.cpus': Numerical
result out of range``), be reserved, or be another guest's one-to-one
CPUs. ``strip_pins`` takes them out; the destination's post-migration
pass binds the guest there.

Invariants:

* only guests this package manages are changed: a guest whose ``<cpu>``
  has ``<numa>`` cells is nova-placed (dedicated or mixed policy, or a
  NUMA-aware flavor) and nova rewrote its pins for the destination: its
  XML is returned unchanged;
* for the others, exactly these go: every ``<vcpupin>``,
  ``<emulatorpin>`` and ``<iothreadpin>`` (ours alone: nova writes none
  for such guests), and ``<numatune>`` (nova writes none for them; ours
  when ``set_home_node`` gave it a home node); ``<cputune>`` itself goes
  only if nothing else is left in it (nova's ``<shares>``, quotas stay);
* everything else is kept byte for byte: the elements are found by a
  real XML parser (expat, with byte offsets), and only the spans of our
  elements that are children of the *top-level* ``<cputune>`` and the
  top-level ``<numatune>`` are cut (with the indentation and line break
  around them). Look-alike text anywhere else (another tool's
  ``<metadata>``, comments, CDATA, attribute values) is never touched;
* the result is always checked: parsed again, it has no pin under the
  top-level ``<cputune>`` and no top-level ``<numatune>``, and apart from
  them it is the same document as the input (C14N, whitespace of text
  stripped); otherwise ``StripError``;
* linear in the size of the XML (one expat pass, one scan per start
  tag, two parses for the check);
* pure: text in, text out; ``StripError`` if the XML is not a domain.
"""

import io
import typing
import xml.etree.ElementTree as ET  # noqa: S405 - nova's own XML
from xml.parsers import expat  # noqa: S410 - nova's own XML

PINS = ('vcpupin', 'emulatorpin', 'iothreadpin')


class StripError(ValueError):
    """Not a domain XML this module can edit."""


def nova_placed(root: ET.Element) -> bool:
    cpu = root.find('cpu')
    numa = cpu.find('numa') if cpu is not None else None
    return numa is not None and numa.find('cell') is not None


def _tag_end(data: bytes, start: int) -> tuple[int, bool]:
    """The offset just past the start tag beginning at ``start`` (a ``<``),
    and whether it closed the element (``/>``): quotes respected, so a
    ``>`` inside an attribute value does not end it."""
    quote = None
    i = start + 1
    n = len(data)
    while i < n:
        c = data[i]
        if quote:
            if c == quote:
                quote = None
        elif c in (0x22, 0x27):  # " '
            quote = c
        elif c == 0x3e:  # >
            return i + 1, data[i - 1] == 0x2f  # /
        i += 1
    raise StripError('unterminated start tag')


class _Cputune(typing.TypedDict, total=False):
    """What ``_spans`` notes of the top-level ``<cputune>``."""

    begin: int  # its offset
    others: int  # children that are not our pins
    pins: list[tuple[int, int]]  # the spans of our pins in it
    pins_n: int  # how many of them, once it closed


def _spans(data: bytes) -> tuple[list[tuple[int, int]], int]:
    """(spans of our elements, whether the top-level cputune empties):
    byte ranges of the pins under the top-level ``<cputune>`` and of the
    top-level ``<numatune>``, from expat's offsets."""
    parser = expat.ParserCreate(encoding='UTF-8')
    cputune: _Cputune
    stack, spans, cputune = [], [], {}

    def start(name: str, _attrs: object) -> None:
        begin = parser.CurrentByteIndex
        end, empty = _tag_end(data, begin)
        stack.append((name, begin, end, empty))
        depth = len(stack)
        if depth == 2 and name == 'cputune':
            cputune.update({'begin': begin, 'others': 0, 'pins': []})
        elif depth == 3 and stack[1][0] == 'cputune' and \
                name not in PINS and 'begin' in cputune:
            cputune['others'] += 1

    def end(name: str) -> None:
        _, begin, tag_end, empty = stack.pop()
        if empty:
            finish = tag_end
        else:
            finish = data.index(b'>', parser.CurrentByteIndex) + 1
        depth = len(stack) + 1
        if depth == 3 and stack[-1][0] == 'cputune' and name in PINS:
            cputune['pins'].append((begin, finish))
        elif depth == 2 and name == 'numatune':
            spans.append((begin, finish))
        elif depth == 2 and name == 'cputune' and cputune.get('pins'):
            if cputune['others']:
                spans.extend(cputune['pins'])
            else:  # nothing of nova's left in it: the whole element
                spans.append((begin, finish))
            cputune['pins_n'] = len(cputune['pins'])

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise StripError('destination XML does not parse: %s' % exc) \
            from None
    return sorted(spans), cputune.get('pins_n', 0)


def _widen(data: bytes, begin: int, end: int) -> tuple[int, int]:
    """The span with the indentation before it and the line break after
    it, when the element stands alone on its line."""
    b = begin
    while b > 0 and data[b - 1] in (0x20, 0x09):
        b -= 1
    e = end
    while e < len(data) and data[e] in (0x20, 0x09):
        e += 1
    if (b == 0 or data[b - 1] == 0x0a) and e < len(data) and \
            data[e] == 0x0a:
        return b, e + 1
    return begin, end


def _canonical(root: ET.Element) -> str:
    return ET.canonicalize(ET.tostring(root, encoding='unicode'),
                           strip_text=True)


def _check(before: ET.Element, after_text: str) -> None:
    """The result has none of our elements and is otherwise the input."""
    after = ET.fromstring(after_text)  # noqa: S314 - what we made
    cputune = after.find('cputune')
    if (cputune is not None and any(cputune.find(p) is not None
                                    for p in PINS)) or \
            after.find('numatune') is not None:
        raise StripError('pins left after stripping')
    for parent, tags in ((before, ('numatune',)),
                         (before.find('cputune'), PINS)):
        if parent is None:
            continue
        for child in list(parent):
            if child.tag in tags:
                parent.remove(child)
    cputune = before.find('cputune')
    if cputune is not None and len(cputune) == 0 and \
            after.find('cputune') is None:
        before.remove(cputune)
    if _canonical(before) != _canonical(after):
        raise StripError('stripping changed more than our pins')


def _pin_forms(root: ET.Element) -> set[str]:
    """The canonical forms (C14N, attributes sorted) of the pins under
    the top-level ``<cputune>`` and of the top-level ``<numatune>``."""
    cputune = root.find('cputune')
    found = [] if cputune is None else [
        child for child in cputune if child.tag in PINS]
    numatune = root.find('numatune')
    if numatune is not None:
        found.append(numatune)
    for element in found:
        element.tail = None  # our own parse: nothing else reads it
    return {ET.canonicalize(ET.tostring(element, encoding='unicode'),
                            strip_text=True) for element in found}


def pins_not_defined(live_xml: str, defined_xml: str) -> list[str]:
    """The pins of a guest's live XML that its persistent definition
    lacks, as canonical XML text, sorted: the live-only pins a pass (or
    ``release``) wrote, which nova carries into a live migration's
    destination unless the filter is installed (admin/nova.rst, "Switch it
    off", step 3). Pins nova defined (a nova-placed guest) are in both
    and are not listed. ``StripError`` if either is not a domain."""
    def parsed(text: str, what: str) -> ET.Element:
        try:
            root = ET.fromstring(text)  # noqa: S314 - libvirt's own XML
        except ET.ParseError as exc:
            raise StripError('%s XML does not parse: %s' % (what, exc)) \
                from None
        if root.tag != 'domain':
            raise StripError('%s XML is a <%s>, not a <domain>'
                             % (what, root.tag))
        return root
    live = _pin_forms(parsed(live_xml, 'live'))
    return sorted(live - _pin_forms(parsed(defined_xml, 'persistent')))


def strip_pins(xml_text: object) -> tuple[str, int]:
    """The destination XML without our pins (see the module's
    invariants). Returns ``(xml, removed)``: ``removed`` counts the
    elements taken out (0: unchanged)."""
    if not isinstance(xml_text, str):
        raise StripError('destination XML is not text: %r' % type(xml_text))
    try:
        root = ET.fromstring(xml_text)  # noqa: S314
    except ET.ParseError as exc:
        raise StripError('destination XML does not parse: %s' % exc) \
            from None
    if root.tag != 'domain':
        raise StripError('destination XML is a <%s>, not a <domain>'
                         % root.tag)
    if nova_placed(root):
        return xml_text, 0
    data = xml_text.encode('utf-8')
    spans, cputune_pins = _spans(data)
    removed = sum(1 for b, _ in spans if data.startswith(b'<numatune', b))
    removed += cputune_pins
    out = io.BytesIO()
    last = 0
    for begin, end in spans:
        begin, end = _widen(data, begin, end)
        if begin < last:
            raise StripError('overlapping spans')
        out.write(data[last:begin])
        last = end
    out.write(data[last:])
    text = out.getvalue().decode('utf-8')
    _check(root, text)
    return text, removed
