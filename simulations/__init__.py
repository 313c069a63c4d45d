"""Race simulations for AideMemo ledgers: model, state machines, history checker, replay."""
