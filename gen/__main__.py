from gen.program import main

main()
