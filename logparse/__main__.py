from logparse.startup import main

main()
