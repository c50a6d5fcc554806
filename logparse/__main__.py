from logparse.cli import main

main()
