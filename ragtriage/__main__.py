from ragtriage.cli import main

main()
