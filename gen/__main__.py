from gen.cli import main

main()
