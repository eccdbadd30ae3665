"""A few functions copied from the evaluation harnesses' own code, so the tests score gen's exports with the very
code those projects run. Each file names its source, the commit it was read at and its license."""
