"""``aidememo-sim check``: a recorded history checked for linearizability against a named model.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from simulations.commands import EXIT_OK, EXIT_UNKNOWN, EXIT_VIOLATION
from simulations.errors import SimulationError
from simulations.linearizability.checker import Model, Verdict

__all__ = ["MODELS", "check_file"]


# Named models for ``check``, imported on first use so that checking a register never loads
# the ledger model. A new model is one line here.
MODELS: dict[str, str] = {
    "cas-register": "simulations.linearizability.register:CAS_REGISTER",
    "kv": "simulations.linearizability.kv:KV",
    "ledger": "simulations.ledger:LEDGER",
}


def model_named(name: str) -> Model[Any]:
    module, attr = MODELS[name].split(":")
    model: Model[Any] = getattr(importlib.import_module(module), attr)
    return model


def check_file(args: argparse.Namespace) -> int:
    from simulations.linearizability.checker import check
    from simulations.linearizability.porcupine import load

    header, history = load(args.file, args.format)
    name = args.model or header.model
    if name is None:
        raise SimulationError(f"{args.file} names no model; give --model ({', '.join(MODELS)})")
    if name not in MODELS:
        raise SimulationError(f"{args.file} names model {name!r}; this kit knows {', '.join(MODELS)}")
    model = model_named(name)
    if hasattr(args, "init"):
        model = model.with_init(args.init)
    elif header.has_init and name == header.model:
        model = model.with_init(header.init)
    try:
        result = check(model, history, budget_s=args.budget, max_configs=args.max_configurations,
                       progress=lambda line: print(line, file=sys.stderr))
    except RecursionError:  # a value the loader read, too deep for the model's comparisons: a crafted file
        raise SimulationError(f"{args.file}: a value nested too deeply to check") from None
    print(result.summary())
    violation = result.violation
    if violation is not None:
        print(violation.explanation)
        if not violation.minimal:
            print("(the shrinking budget ran out: the set above may not be the smallest)")
    if args.html:
        from simulations.linearizability.timeline import write_timeline

        write_timeline(
            args.html,
            history,
            title=f"{args.file.name}: {result.verdict.value}",
            highlight=violation.witness if violation else (),
            explanation=violation.explanation if violation else result.summary(),
        )
        print(f"timeline: {args.html}")
    return {Verdict.OK: EXIT_OK, Verdict.ILLEGAL: EXIT_VIOLATION, Verdict.UNKNOWN: EXIT_UNKNOWN}[
        result.verdict
    ]
