"""The live model of the host's domains, kept between passes.

In the spirit of an informer (list, watch, resync): a pass lists the
active domains (one libvirt call) and fetches the live XML only of the
domains this model cannot vouch for; libvirt's domain events, a lost
connection and a periodic resync say which those are. ``virt.Host``
feeds it; ``reconciler`` reads its ``generation`` to know whether
anything changed since the plan in force was made.

Invariants:

* keyed by UUID. A domain is fetched again when it is new, when an
  event named it (``mark``), when its id changed since it was fetched (it
  was destroyed and created again, perhaps with other XML, and perhaps
  while events were lost), or when everything was invalidated (first
  pass, connection lost or reopened, ``resync``);
* ``take`` hands the marks made so far to one pass and clears them
  atomically: a mark made while that pass runs (an event about a write
  it just made, or about a domain it already read) stays for the next
  pass, so no change is ever lost between passes, only read twice;
* a pass that fails while reading gives its marks back (``give_back``),
  or invalidates everything when it cannot tell which were read;
* ``generation`` grows whenever what a plan is made from changes: a
  domain's XML text, memory placement, vCPU thread affinity or arrival
  (``arrived``), a domain appearing or going away, and a domain a pass
  wrote to (``written``), when it is read next. Equal generations mean
  the same input, and that nothing was written since;
* a domain's ``entry`` is the same object until something read of it
  changes: ``snapshot.Loader`` parses a domain again only then;
* thread-safe: ``mark`` and ``invalidate`` are called from libvirt's
  event thread, hold a lock for microseconds and never call out; no I/O.
"""

import dataclasses
import threading
import typing

from nova_pinning_hooks.engine import snapshot

# (uuid, id, name) of each active domain, as listed
Listing = typing.Sequence[tuple[str, int, str]]


@dataclasses.dataclass
class Domain:
    uuid: str
    id: int  # libvirt's domain id: new at every start of the domain
    name: str
    xml: typing.Optional[str]  # None once written to (stale)
    memory: dict[str, int]  # {"<node>": KiB}
    # {"<vCPU>": "CPU set"}, or None when not read
    affinity: typing.Optional[dict[str, str]]
    arrived: bool = False  # its qemu started with -incoming (read when split)
    _entry: typing.Optional[snapshot.DomainEntry] = dataclasses.field(
        default=None, repr=False, compare=False)

    def entry(self) -> snapshot.DomainEntry:
        """The domain as a snapshot entry, made once: the same object
        for as long as nothing read of the domain changes, so that
        ``snapshot.Loader`` need not look inside it again."""
        if self._entry is None:
            entry: snapshot.DomainEntry = {
                'xml': self.xml, 'active': True,
                'memory_by_node_kib': self.memory}
            if self.affinity is not None:
                entry['kernel_vcpu_affinity'] = self.affinity
            if self.arrived:
                entry['arrived'] = True
            self._entry = entry
        return self._entry


class HostModel:

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # uuid -> Domain, in listing order
        self._domains: dict[str, Domain] = {}
        self._marked: set[str] = set()
        self._everything = True  # nothing read yet
        self.generation = 0
        self.reason = 'first read'  # why everything is to be read

    # -- what events and failures say (any thread) ----------------------

    def mark(self, uuid: str) -> None:
        """The domain ``uuid`` may have changed: fetch it again."""
        with self._lock:
            self._marked.add(uuid)

    def invalidate(self, reason: str) -> None:
        """Anything may have changed: fetch every domain again."""
        with self._lock:
            self._everything = True
            self.reason = reason

    # -- what a pass does -------------------------------------------------

    def take(self) -> tuple[bool, set[str]]:
        """(everything, marked uuids) for one pass; both cleared."""
        with self._lock:
            everything, marked = self._everything, self._marked
            self._everything, self._marked = False, set()
            return everything, marked

    def give_back(self, everything: bool,
                  marked: typing.AbstractSet[str]) -> None:
        """A pass that failed while reading returns what it took."""
        with self._lock:
            self._everything = self._everything or everything
            self._marked |= marked

    def to_fetch(self, listing: Listing, everything: bool,
                 marked: typing.AbstractSet[str]) -> list[str]:
        """Of ``listing`` ([(uuid, id, name)], the active domains), the
        uuids whose XML must be fetched; domains no longer listed are
        forgotten (and the generation bumped)."""
        listed = {uuid for uuid, _, _ in listing}
        gone = [u for u in self._domains if u not in listed]
        for uuid in gone:
            del self._domains[uuid]
        if gone:
            self.generation += 1
        fetch = []
        for uuid, dom_id, name in listing:
            known = self._domains.get(uuid)
            if everything or uuid in marked or known is None or \
                    known.id != dom_id or known.name != name:
                fetch.append(uuid)
        return fetch

    def store(self, uuid: str, dom_id: int, name: str, xml: str,
              memory: dict[str, int],
              affinity: typing.Optional[dict[str, str]],
              arrived: bool = False) -> bool:
        """What was fetched for ``uuid``; True if it differs from what
        was known (the generation then grows). What did not change is
        kept as it was, the same object."""
        old = self._domains.get(uuid)
        if old is not None and (old.id, old.name, old.xml, old.memory,
                                old.affinity, old.arrived) == (
                                    dom_id, name, xml, memory, affinity,
                                    arrived):
            return False
        self._domains[uuid] = Domain(uuid, dom_id, name, xml, memory,
                                     affinity, arrived)
        if old is None or (old.xml, old.memory, old.affinity,
                           old.arrived) != (xml, memory, affinity, arrived):
            self.generation += 1
            return True
        return False

    def written(self, uuid: str) -> None:
        """A pass wrote to ``uuid``: what is known of it is stale. It is
        fetched next pass and counts as changed even if it reads as it
        did before the write (someone put the old pins back)."""
        self.mark(uuid)
        known = self._domains.get(uuid)
        if known is not None:
            known.xml = known._entry = None

    def forget(self, uuid: str) -> None:
        """``uuid`` went away while being read."""
        if self._domains.pop(uuid, None) is not None:
            self.generation += 1

    def domains(self, listing: Listing) -> list[Domain]:
        """The known domains, in ``listing``'s order."""
        return [self._domains[uuid] for uuid, _, _ in listing
                if uuid in self._domains]

    def __len__(self) -> int:
        return len(self._domains)
