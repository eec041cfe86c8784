# nova applies its eventlet monkey patching when its test packages are
# imported: nova.tests.functional does it in nova 29 to 31, 33 and 34,
# nova.test in nova 29 to 32 (only there in 32). It must come before
# anything else of nova is imported: in nova 32, with nova.conf imported
# first, a live migration's monitor and its migration operation (two
# green threads) shared one database transaction and the monitor failed
# ("Can't upgrade a READER transaction to a WRITER mid-transaction"),
# with and without the package, in the run of 2026-11-24.
import nova.tests.functional  # noqa: F401
from nova import test  # noqa: F401
