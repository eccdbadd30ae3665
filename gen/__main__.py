from gen.cli import entry

entry()
