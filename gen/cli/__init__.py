"""The `gen` command line: the only package that imports typer. Every command parses its options, builds the
options object of its function in the Python API (gen/api/), calls it once and prints what it returns; the work
is never here. The modules:

    main.py        the typer app, the options before the command, the commands registered, and how every way out
                   ends (one message and an exit code; a defect's traceback in a file)
    options.py     the options several commands share, and the range of every number the command line takes
    building.py    gen run, plan, validate, preview
    publishing.py  gen push, export, import-predictions
    scoring.py     gen eval, baseline, judge
    view.py        gen view
    caches.py      gen batches (cancel, forget), gen cache repair
    catalog.py     gen schema, products

gen/program.py is the console entry; it imports `entry` from here once the stop signals are taken.
"""

from gen.cli.building import dollars
from gen.cli.main import app, entry, main

__all__ = ["app", "dollars", "entry", "main"]
