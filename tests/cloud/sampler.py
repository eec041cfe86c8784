"""Unpinned guest-seconds: how long the package's guests ran on CPUs other
than the policy's while something happened to the cloud (issue 42's
day-two scenarios).

A ``Sampler`` thread reads, every ``interval`` seconds (0.5), every
running guest's vCPU threads on both computes from /proc (the qemu pid
files in each compute's libvirt run directory, then ``Cpus_allowed_list``
of each "CPU N/KVM" task: ``tests.cloud.kernel``), and compares them with
what the policy says for the guests that run on that host at that
moment (``expected``, computed here from the kernel's view and each
guest's flavor, independently of the package: one-to-one while the
host's managed vCPUs fit its pool, the whole pool otherwise; nova's pins
for dedicated guests, which are not counted). A managed guest that is
not where the policy says in a sample is unpinned for that interval.

``report()`` gives, per guest and in all, the unpinned guest-seconds and
the longest unpinned stretch of one guest, and how many samples were
taken; ``beyond()`` the unpinned guest-seconds beyond one pass per event:
a sample counts there unless the host's set of running guests changed
less than ``budget`` seconds before it (a guest that just started runs
where qemu put it until its pass, and its neighbours keep their old pins
until that pass: the package working, not failing).

Reading only: nothing here writes to /proc, libvirt or the cloud; the
flavors of guests are read from nova's API when a guest first shows up
(``flavor_of``: a callable given by the test), never at each sample.
"""

import os
import threading
import time

from tests.cloud import kernel

DEDICATED = 'nph.dedicated'


def running_guests(state=kernel.STATE):
    """{host: {instance name: qemu pid}} of every qemu that runs."""
    out = {}
    for host in kernel.HOSTS:
        run = os.path.join(state, 'compute%d' % kernel.host_index(host),
                           'run', 'libvirt', 'qemu')
        guests = {}
        try:
            names = os.listdir(run)
        except OSError:
            names = []
        for name in names:
            if not name.endswith('.pid'):
                continue
            instance = name[:-4]
            pid = kernel.qemu_pid(host, instance)
            if pid:
                guests[instance] = pid
        out[host] = guests
    return out


def expected(host_guests, flavors, pools):
    """{(host, instance): 'one-to-one' | frozenset} for the managed guests
    of one sample: what the policy says (a pool per host, one node each,
    as the cloud's computes have). ``host_guests``: {host: {instance:
    {vcpu: cpus}}}; ``flavors``: {instance: (flavor name, vCPUs)}."""
    out = {}
    for host, guests in host_guests.items():
        managed = [i for i in guests
                   if flavors.get(i, (DEDICATED, 0))[0] != DEDICATED]
        total = sum(len(guests[i]) for i in managed)
        pool = pools[host]
        for i in managed:
            out[(host, i)] = 'one-to-one' if total <= len(pool) else pool
    return out


def wrong(host_guests, flavors, pools):
    """The (host, instance) pairs not where the policy says."""
    bad = set()
    for (host, instance), want in expected(host_guests, flavors,
                                           pools).items():
        threads = host_guests[host][instance]
        pool = pools[host]
        if want == 'one-to-one':
            taken = {}
            for other, other_threads in host_guests[host].items():
                if (host, other) not in expected(
                        {host: host_guests[host]}, flavors, pools):
                    continue
                for cpus in other_threads.values():
                    if len(cpus) == 1:
                        taken.setdefault(cpus, []).append(other)
            for cpus in threads.values():
                if len(cpus) != 1 or not cpus <= pool or \
                        len(taken.get(cpus, ())) > 1:
                    bad.add((host, instance))
        elif any(cpus != want for cpus in threads.values()):
            bad.add((host, instance))
    return bad


class Sampler(threading.Thread):
    """Samples until ``stop()``; ``report()`` after."""

    def __init__(self, flavor_of, pools, interval=0.5,
                 state=kernel.STATE, budget=10.0):
        super().__init__(daemon=True, name='nph-cloud-sampler')
        self.flavor_of = flavor_of  # instance name -> (flavor, vCPUs)
        self.pools = pools
        self.interval = interval
        self.state = state
        self._halt = threading.Event()
        self._first = threading.Event()  # the first sample is taken
        self.flavors = {}
        self.samples = 0
        self.unpinned = {}  # (host, instance) -> seconds
        self.longest = {}   # (host, instance) -> longest stretch, s
        self._since = {}    # (host, instance) -> when its stretch began
        self.budget = budget
        self.beyond_pass = {}  # (host, instance) -> seconds beyond a pass
        self._guests = {}   # host -> its running instances, last sample
        self._changed = {}  # host -> when its set of guests last changed
        self.errors = []
        self.first_beyond = []  # (s since start, host, instance, threads)
        self._start = None

    def start(self):
        """Starts sampling and returns after the first sample: the
        baseline every change is measured from is taken before the
        event (a host's guests killed while the first sample was still
        to come made the survivors count as unpinned with no change
        seen)."""
        super().start()
        self._first.wait(30)

    def stop(self):
        self._halt.set()
        self.join(30)

    def sample(self, now):
        host_guests = {}
        for host, guests in running_guests(self.state).items():
            host_guests[host] = {}
            for instance, pid in guests.items():
                threads = kernel.vcpu_threads(pid)
                if not threads:
                    continue
                if instance not in self.flavors:
                    try:
                        self.flavors[instance] = self.flavor_of(instance)
                    except Exception as exc:  # the API may be down
                        self.errors.append('%s: %s' % (instance, exc))
                        continue
                host_guests[host][instance] = threads
        bad = wrong(host_guests, self.flavors, self.pools)
        self._count(now, host_guests, bad)
        for host, instance in sorted(bad):
            if (host, instance) in self.beyond_pass and \
                    len(self.first_beyond) < 10:
                self.first_beyond.append((
                    round(now - (self._start or now), 1), host, instance,
                    {v: sorted(c) for v, c in
                     host_guests[host][instance].items()},
                    sorted(host_guests[host])))

    def _count(self, now, host_guests, bad):
        """Count one sample: ``bad``, the guests not where the policy
        says among ``host_guests``."""
        for host, guests in host_guests.items():
            names = frozenset(guests)
            if self._guests.get(host) != names:
                if host in self._guests:  # not the first sample
                    self._changed[host] = now
                self._guests[host] = names
        self.samples += 1
        for key in bad:
            self.unpinned[key] = self.unpinned.get(key, 0.0) + self.interval
            self._since.setdefault(key, now)
            changed = self._changed.get(key[0])
            if changed is None or now - changed > self.budget:
                self.beyond_pass[key] = self.beyond_pass.get(key, 0.0) + \
                    self.interval
        for key in list(self._since):
            if key not in bad:
                start = self._since.pop(key)
                self.longest[key] = max(self.longest.get(key, 0.0),
                                        now - start)

    def run(self):
        self._start = time.monotonic()
        while not self._halt.is_set():
            now = time.monotonic()
            try:
                self.sample(now)
            except Exception as exc:  # a guest gone between two reads
                self.errors.append(repr(exc))
            self._first.set()
            self._halt.wait(max(0.0, self.interval -
                                (time.monotonic() - now)))
        now = time.monotonic()
        for key, start in self._since.items():
            self.longest[key] = max(self.longest.get(key, 0.0), now - start)
        self._since.clear()

    def beyond(self):
        """Unpinned guest-seconds beyond one pass per event."""
        return round(sum(self.beyond_pass.values()), 1)

    def report(self):
        """(unpinned guest-seconds in all, the longest stretch of one
        guest, samples, {(host, instance): seconds})."""
        return (round(sum(self.unpinned.values()), 1),
                round(max(self.longest.values(), default=0.0), 1),
                self.samples, dict(self.unpinned))
