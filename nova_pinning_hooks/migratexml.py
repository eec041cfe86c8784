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
* everything else is kept byte for byte: the edit is textual, on the
  elements libvirt prints one per line, so nova's own changes (disks,
  VIFs, graphics, ``<vcpu cpuset>``, metadata and its namespaces) are
  untouched;
* pure: text in, text out; ``StripError`` if the XML is not a domain.
"""

import re
import xml.etree.ElementTree as ET  # noqa: S405 - nova's own XML

_PIN = re.compile(r'[ \t]*<(?:vcpupin|emulatorpin|iothreadpin)\b[^>]*/>'
                  r'[ \t]*\n?')
_NUMATUNE = re.compile(r'[ \t]*<numatune\b.*?</numatune>[ \t]*\n?|'
                       r'[ \t]*<numatune\b[^>]*/>[ \t]*\n?', re.S)
_EMPTY_CPUTUNE = re.compile(r'[ \t]*<cputune>\s*</cputune>[ \t]*\n?|'
                            r'[ \t]*<cputune/>[ \t]*\n?')
_CPUTUNE = re.compile(r'<cputune\b.*?</cputune>', re.S)


class StripError(ValueError):
    """Not a domain XML this module can edit."""


def nova_placed(root):
    cpu = root.find('cpu')
    numa = cpu.find('numa') if cpu is not None else None
    return numa is not None and numa.find('cell') is not None


def strip_pins(xml_text):
    """The destination XML without our pins (see the module's
    invariants). Returns ``(xml, removed)``: ``removed`` counts the
    elements taken out (0: unchanged)."""
    try:
        root = ET.fromstring(xml_text)  # noqa: S314
    except (ET.ParseError, TypeError) as exc:
        raise StripError('destination XML does not parse: %s' % exc) \
            from None
    if root.tag != 'domain':
        raise StripError('destination XML is a <%s>, not a <domain>'
                         % root.tag)
    if nova_placed(root):
        return xml_text, 0
    removed = 0

    def in_cputune(match):
        nonlocal removed
        block, n = _PIN.subn('', match.group(0))
        removed += n
        return block
    text = _CPUTUNE.sub(in_cputune, xml_text)
    text, n = _NUMATUNE.subn('', text)
    removed += n
    text = _EMPTY_CPUTUNE.sub('', text)
    if removed:
        left = ET.fromstring(text)  # noqa: S314 - what we made
        if left.find('cputune/vcpupin') is not None or \
                left.find('numatune') is not None:
            raise StripError('pins left after stripping')
    return text, removed
