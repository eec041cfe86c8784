"""The binding policy: the seed's rules as pure functions, one module a
decision stage (doc/source/reference/policy.rst):

* ``options``: what a plan is made with (``Options``) and its one check
  against the host (``validate``, ``ratio_ok``);
* ``homes``: which guests are managed, and the home node of each;
* ``layout``: the guest pool, the totals the rules compare, and what the
  rules decide for the host as a whole (a ``Layout``);
* ``placement``: each guest's plan under that layout;
* ``make``: the entry points, a whole host's plan (``make_plan``,
  ``plan_with_state`` for ``replan``) and the release plan.

Each stage imports only the stages before it. This package names the
policy's public face, what the layers above the engine use; the
engine's own modules (``replan``, ``summary``) import the stage they
use.
"""

from nova_pinning_hooks.engine.policy.layout import guest_pool
from nova_pinning_hooks.engine.policy.make import make_plan
from nova_pinning_hooks.engine.policy.make import release_plan
from nova_pinning_hooks.engine.policy.options import MAX_RATIO
from nova_pinning_hooks.engine.policy.options import Options
from nova_pinning_hooks.engine.policy.options import PolicyError
from nova_pinning_hooks.engine.policy.options import ratio_ok
from nova_pinning_hooks.engine.policy.options import validate

__all__ = ['MAX_RATIO', 'Options', 'PolicyError', 'guest_pool', 'make_plan',
           'ratio_ok', 'release_plan', 'validate']
