"""Recovery decisions over committed RuntimeEvents: the resolver, the Phase 0 resume plan and the
named crash points. Everything here except the ``failpoint`` hook is pure: it reads events and
returns immutable values, and never writes."""
