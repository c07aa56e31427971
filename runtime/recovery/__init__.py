"""Recovery after a crash: the resolver and the Phase 0 resume plan (pure decisions over committed
events: they read events, return immutable values and never write), the failpoint catalog and
its SIGKILL hook, and the startup recovery steps that act on those decisions through the store
ports."""
