from singlehead.cli import main

main()
